/**
 * Backend choice: `bwrap`, `docker`, or `auto` (Docker when the engine answers and the image
 * exists, else bwrap). There is never an unsandboxed fallback: when nothing is usable the
 * error gives each backend's reason, and each reason names its fix.
 */
import { FusionError } from '../errors.js';
import type { Launcher, LauncherName } from './port.js';

export type LauncherFactories = Partial<Record<LauncherName, () => Launcher>>;

export async function selectLauncher(choice: 'auto' | LauncherName, factories: LauncherFactories): Promise<Launcher> {
  const order: LauncherName[] = choice === 'auto' ? ['docker', 'bwrap'] : [choice];
  const reasons: string[] = [];
  for (const name of order) {
    const make = factories[name];
    if (!make) {
      reasons.push(`${name}: backend not built into this daemon`);
      continue;
    }
    const launcher = make();
    const check = await launcher.check();
    if (check.ok) return launcher;
    reasons.push(`${name}: ${check.reason ?? 'not usable'}`);
  }
  // Each reason names its own fix (install, start, join a group, build the image, the rlimit
  // mode): a generic "install bubblewrap or Docker" would be wrong whenever they are installed.
  throw new FusionError('sandbox_unavailable', `no sandbox backend is usable: ${reasons.join('; ')}`, {
    details: { choice, reasons },
  });
}
