/**
 * A task's event stream as lines a person (or an MCP client's progress bar) can follow: the
 * time since the task was created, state changes, each candidate's attempts and tool-call
 * count (the daemon's `activity` progress events), and on request a heartbeat line that says
 * the task is alive while a model thinks for minutes. Used by `fusion … --wait`, `fusion logs`
 * and the MCP server's progress notifications, so all three say the same thing.
 */
import type { TaskEvent } from '../store/port.js';

interface StageView {
  attempt: number;
  /** started, succeeded, failed… (the stage's last attempt event). */
  status: string;
  toolCalls: number;
}

/** `1m05s`, `12s`, `2h03m`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  const h = Math.floor(m / 60);
  if (h < 48) return `${h}h${String(m % 60).padStart(2, '0')}m`;
  return `${Math.floor(h / 24)}d${String(h % 24).padStart(2, '0')}h`;
}

export class TaskProgress {
  private start: number | undefined;
  private state = 'new';
  private lastEventAt: number | undefined;
  private readonly stages = new Map<string, StageView>();
  /** Events seen (the MCP progress counter: it only grows). */
  count = 0;

  /**
   * `resultFollows`: the caller prints the task's result (its error in full) right after the
   * stream, so the terminal line names the outcome and the error code only, not the message again.
   */
  constructor(readonly taskId: string, createdAt?: string, private readonly options: { resultFollows?: boolean } = {}) {
    if (createdAt !== undefined) this.start = Date.parse(createdAt);
  }

  /** The task's state as last seen. */
  get currentState(): string {
    return this.state;
  }

  /** Per-stage tool-call counts, e.g. `candidate-1 12 calls (running), candidate-2 done (30 calls)`. */
  stageSummary(): string {
    const parts: string[] = [];
    for (const [stage, v] of this.stages) {
      const running = v.status === 'started' || v.status === 'activity';
      const calls = v.toolCalls > 0 || stage.startsWith('candidate') ? ` ${v.toolCalls} tool call${v.toolCalls === 1 ? '' : 's'}` : '';
      parts.push(`${stage}${calls}${running ? '' : ` (${v.status})`}`);
    }
    return parts.join(', ');
  }

  private elapsed(at: number): string {
    this.start ??= at;
    return `+${formatDuration(at - this.start)}`;
  }

  /** Takes one event; returns the line to show for it, or undefined when it changes nothing worth a line. */
  update(event: TaskEvent): string | undefined {
    this.count += 1;
    const at = Date.parse(event.at);
    const stamp = `[${this.elapsed(at)}]`;
    this.lastEventAt = at;
    const data = event.data;
    if (event.kind === 'transition') {
      const from = data.from === null || data.from === undefined ? (this.state === 'new' ? 'submitted' : this.state) : String(data.from);
      this.state = String(data.to);
      return `${stamp} ${from} → ${this.state}`;
    }
    if (event.kind === 'terminal') {
      if (this.options.resultFollows !== true) return `${stamp} ${String(data.summary ?? data.status ?? 'ended')}`;
      const code = (data.error as { code?: unknown } | null | undefined)?.code;
      return `${stamp} ${String(data.status ?? 'ended')}${typeof code === 'string' ? ` (${code})` : ''}`;
    }
    if (typeof data.stage !== 'string') {
      if (typeof data.recovery === 'string') return `${stamp} daemon ${data.recovery} the task (${String(data.state ?? this.state)})`;
      return undefined;
    }
    const stage = data.stage;
    const prev = this.stages.get(stage);
    const attempt = typeof data.attempt === 'number' ? data.attempt : (prev?.attempt ?? 1);
    const toolCalls = typeof data.toolCalls === 'number' ? data.toolCalls : attempt === prev?.attempt ? prev.toolCalls : 0;
    const status = String(data.event ?? 'activity');
    this.stages.set(stage, { attempt, status: status === 'activity' ? (prev?.status === 'started' ? 'started' : 'activity') : status, toolCalls });
    if (status === 'activity') {
      if (toolCalls === prev?.toolCalls) return undefined;
      return `${stamp}   ${stage}: ${toolCalls} tool call${toolCalls === 1 ? '' : 's'} so far`;
    }
    const calls = typeof data.toolCalls === 'number' ? ` (${toolCalls} tool call${toolCalls === 1 ? '' : 's'})` : '';
    return `${stamp}   ${stage} attempt ${attempt} ${status}${calls}`;
  }

  /** The line shown when nothing happened for a while: alive, where it is, how long since the last event. */
  heartbeat(now: number): string {
    const stages = this.stageSummary();
    const quiet = this.lastEventAt === undefined ? '' : `; last event ${formatDuration(now - this.lastEventAt)} ago`;
    return `[${this.elapsed(now)}] still ${this.state}${stages === '' ? '' : ` — ${stages}`}${quiet}`;
  }
}
