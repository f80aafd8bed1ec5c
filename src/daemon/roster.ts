/**
 * The model roster of each task: fatal at start-up when the models file, a flag or a key is
 * wrong (never silently defaulted).
 */
import type { Logger } from '../log.js';
import type { DaemonConfig } from '../contracts/config.js';
import type { BudgetConfig } from '../contracts/budget.js';
import type { TaskOptions } from '../contracts/task-options.js';
import type { Roster } from '../models/roster.js';
import { loadRosterConfig } from '../models/roster-config.js';
import type { DaemonOverrides } from './types.js';

export type RosterFor = (options: TaskOptions) => { roster: Roster; describe(): unknown; budget?: BudgetConfig };

export function loadRosters(config: DaemonConfig, overrides: Pick<DaemonOverrides, 'env' | 'roster'>, log: Logger): { rosterFor: RosterFor; describe(): unknown } {
  const rosterSource = loadRosterConfig({
    ...(config.modelsFile ? { file: config.modelsFile } : {}),
    env: overrides.env ?? {},
    log,
    adminOverrides: {
      ...(config.candidateModels.length > 0 ? { candidate: config.candidateModels } : {}),
      ...(config.evaluatorModel ? { evaluator: config.evaluatorModel } : {}),
      ...(config.mergerModel ? { merger: config.mergerModel } : {}),
    },
  });
  const fixed = overrides.roster;
  const rosterFor: RosterFor = (options) => (fixed ? { roster: fixed, describe: () => ({ source: 'fixed roster (test seam)' }) } : rosterSource.build(options.models));
  // loadRosterConfig logs the roster it loaded (once).
  return { rosterFor, describe: () => rosterSource.describe() };
}
