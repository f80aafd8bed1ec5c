/**
 * `fusion models check`: one minimal request to every distinct configured model — a tiny prompt
 * that offers one trivial tool and asks the model to call it — reporting reachability, latency
 * and whether the model returned a structured tool call (candidates need tool calls to use the
 * repository tools; evaluator and merger never get tools, so for them it is informational).
 *
 * The builtin engine is offline and plays fixed roles; it is reported without a request.
 */
import type { ToolSpec } from '../contracts/broker-protocol.js';
import { toFusionError } from '../errors.js';
import type { ModelProvider, ModelRequest } from './port.js';
import type { RosterDescription } from './roster-config.js';
import type { ProviderDescription } from './remote-provider.js';
import type { Roster } from './roster.js';

export const CHECK_TOOL: ToolSpec = {
  name: 'ping',
  description: 'Connectivity check. Call this tool with echo set to "pong".',
  parameters: { type: 'object', properties: { echo: { type: 'string' } }, required: ['echo'], additionalProperties: false },
};

export function checkRequest(signal?: AbortSignal): ModelRequest {
  return {
    role: 'candidate',
    taskId: 'models-check',
    messages: [
      { role: 'system', content: 'You are a connectivity check. Answer only by calling the ping tool.' },
      { role: 'user', content: 'Call the ping tool with {"echo":"pong"}. Do not answer in text.' },
    ],
    tools: [CHECK_TOOL],
    // Room for reasoning models, which spend tokens before the call.
    maxOutputTokens: 1024,
    ...(signal ? { signal } : {}),
  };
}

export interface ModelCheckResult {
  /** e.g. `candidate 1`, `candidate 2`, `evaluator`: every role this model serves. */
  roles: string[];
  id: string;
  engine: string;
  baseUrl?: string;
  reachable: boolean;
  latencyMs: number | null;
  /** Did the model answer the request with a structured call of the offered tool? */
  toolCalls: boolean | null;
  stopReason?: string;
  /** The model that answered, as the server reports it. */
  answeredBy?: string;
  error?: { code: string; message: string };
  note?: string;
}

export interface ModelsCheckReport {
  /** Every model reachable, and every candidate model returned a tool call. */
  ok: boolean;
  source: string;
  models: ModelCheckResult[];
}

interface Target {
  roles: string[];
  provider: ModelProvider;
  description: ProviderDescription;
}

function targetsOf(roster: Roster, description: RosterDescription): Target[] {
  const entries: Array<{ role: string; provider: ModelProvider; description: ProviderDescription }> = [
    { role: 'candidate 1', provider: roster.candidate(1), description: description.candidates[0]! },
    { role: 'candidate 2', provider: roster.candidate(2), description: description.candidates[1]! },
    { role: 'candidate 3', provider: roster.candidate(3), description: description.candidates[2]! },
    { role: 'evaluator', provider: roster.evaluator(), description: description.evaluator },
    { role: 'merger', provider: roster.merger(), description: description.merger },
  ];
  // One request per distinct model and endpoint (self-fusion checks its model once).
  const byKey = new Map<string, Target>();
  for (const e of entries) {
    const key = JSON.stringify([e.description.id, e.description.baseUrl ?? null, e.description.keySource ?? null]);
    const t = byKey.get(key);
    if (t) t.roles.push(e.role);
    else byKey.set(key, { roles: [e.role], provider: e.provider, description: e.description });
  }
  return [...byKey.values()];
}

async function checkOne(t: Target, timeoutMs: number): Promise<ModelCheckResult> {
  const base = {
    roles: t.roles,
    id: t.description.id,
    engine: t.description.engine,
    ...(t.description.baseUrl === undefined ? {} : { baseUrl: t.description.baseUrl }),
  };
  if (t.description.engine === 'builtin') {
    return { ...base, reachable: true, latencyMs: 0, toolCalls: true, note: 'offline builtin engine (no request sent)' };
  }
  const started = performance.now();
  try {
    const res = await t.provider.complete(checkRequest(AbortSignal.timeout(timeoutMs)));
    const latencyMs = Math.round(performance.now() - started);
    const called = res.toolCalls.some((c) => c.name === CHECK_TOOL.name);
    return {
      ...base,
      reachable: true,
      latencyMs,
      toolCalls: called,
      stopReason: res.stopReason,
      answeredBy: res.model,
      ...(called ? {} : { note: 'the model answered in text instead of calling the offered tool' }),
    };
  } catch (err) {
    const fe = toFusionError(err, 'model_error');
    return { ...base, reachable: false, latencyMs: Math.round(performance.now() - started), toolCalls: null, error: { code: fe.code, message: fe.message } };
  }
}

/** Checks every distinct model of the roster, in parallel. */
export async function checkModels(roster: Roster, description: RosterDescription, options: { timeoutMs?: number } = {}): Promise<ModelsCheckReport> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const models = await Promise.all(targetsOf(roster, description).map((t) => checkOne(t, timeoutMs)));
  const ok = models.every((m) => m.reachable && (m.toolCalls === true || !m.roles.some((r) => r.startsWith('candidate'))));
  return { ok, source: description.source, models };
}

/** Human-readable report lines. */
export function formatCheckReport(report: ModelsCheckReport): string {
  const lines = [`models (${report.source}):`];
  for (const m of report.models) {
    const where = m.baseUrl === undefined ? '' : ` @ ${m.baseUrl}`;
    const status = m.reachable
      ? `ok  ${m.latencyMs ?? 0} ms  tool calls: ${m.toolCalls === true ? 'yes' : 'NO'}`
      : `UNREACHABLE  ${m.error?.code ?? 'error'}: ${m.error?.message ?? ''}`;
    lines.push(`  ${m.roles.join(', ')}: ${m.id}${where}  ${status}${m.note ? `  (${m.note})` : ''}`);
  }
  lines.push(report.ok ? 'all models ok' : 'some models are not usable (see above)');
  return `${lines.join('\n')}\n`;
}
