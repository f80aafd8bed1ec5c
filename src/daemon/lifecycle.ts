/**
 * The daemon's one stack of close functions. Each part of the start-up registers how to close
 * what it opened the moment it has opened it; a start-up that fails part way and a shutdown run
 * the same stack, newest first, so nothing opened is ever left out of either.
 */
import type { Logger } from '../log.js';

type CloseFn = () => Promise<unknown> | unknown;

export class Lifecycle {
  private readonly stack: Array<{ name: string; close: CloseFn }> = [];
  private closing: Promise<void> | undefined;
  /** The close step under way ('not started' before, 'done' after): what a shutdown deadline reports as stuck. */
  private step = 'not started';

  constructor(private readonly log: Logger) {}

  /** Registers how to close something just opened; `name` is the shutdown step it becomes. */
  defer(name: string, close: CloseFn): void {
    if (this.closing !== undefined) throw new Error(`lifecycle: "${name}" was opened after the daemon began closing`);
    this.stack.push({ name, close });
  }

  get currentStep(): string {
    return this.step;
  }

  /**
   * Runs `build`; when it throws, everything it registered is closed (newest first) and the
   * original error is rethrown: a failed start-up leaves nothing open, whatever step failed.
   */
  async start<T>(build: () => Promise<T>): Promise<T> {
    try {
      return await build();
    } catch (err) {
      await this.close().catch(() => undefined);
      throw err;
    }
  }

  /**
   * Closes everything registered, newest first, once (later calls share the first). A step that
   * fails is logged and the next ones still run, so one stuck adapter does not keep the others
   * (the store, the data-directory lock) open; the first failure rejects the whole close.
   */
  close(): Promise<void> {
    this.closing ??= this.closeAll();
    return this.closing;
  }

  private async closeAll(): Promise<void> {
    let first: { err: unknown } | undefined;
    for (const { name, close } of this.stack.splice(0).reverse()) {
      this.step = name;
      try {
        await close();
      } catch (err) {
        this.log.error({ err, step: name }, 'shutdown step failed');
        first ??= { err };
      }
    }
    this.step = 'done';
    if (first !== undefined) throw first.err;
  }
}
