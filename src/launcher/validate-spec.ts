/**
 * Checks a SandboxSpec before any backend builds a sandbox from it: an empty command, NUL bytes
 * or a malformed environment would otherwise surface as confusing backend errors.
 */
import { FusionError } from '../errors.js';
import type { SandboxSpec } from './port.js';

export function validateSpec(spec: SandboxSpec): void {
  const fail = (message: string): never => {
    throw new FusionError('invalid_input', message, { details: { taskId: spec.taskId, label: spec.label } });
  };
  if (spec.command.length === 0 || spec.command[0] === '') fail('sandbox command is empty');
  for (const arg of spec.command) if (arg.includes('\0')) fail('sandbox command contains a NUL byte');
  for (const [key, value] of Object.entries(spec.env ?? {})) {
    if (key === '' || key.includes('=') || key.includes('\0') || value.includes('\0')) fail(`invalid sandbox env variable ${JSON.stringify(key)}`);
  }
  for (const [key, value] of Object.entries(spec.limits)) {
    if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) fail(`sandbox limit ${key} must be a positive number`);
  }
}
