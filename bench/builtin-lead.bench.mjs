// What the builtin engine's answer LEADS with, on code it has never seen: questions over
// published packages in node_modules (not this repository), each with the file that answers it
// and, where one function answers it, the lines of that definition.
//
// Every question runs the whole builtin workflow in-process, as a task does (three candidates
// executing the real sandbox tools over the package directory, the workflow's own citation
// checks, the evaluator, the merger), with no sandbox; the final merged answer is scored:
//
//   lead_file    the first 400 characters of the answer name the expected file
//   lead_line    … and cite a line inside the expected definition (where the question has one)
//   anywhere     the expected file is named somewhere in the answer
//
// The set is split: `dev` questions were used while tuning the engine; `held_out` ones (every
// third) were only scored, so the gap between the two says how far the tuning fitted the set.
// Short mode (BENCH_SHORT=1, as CI runs it) scores every fifth question only (dev and held-out).
import { SHORT } from './short.mjs';
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { Buffer } from 'node:buffer';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
const MODULES = join(ROOT, 'node_modules');
export const LEAD_CHARS = 400;

/**
 * pkg: directory under node_modules; files: acceptable paths (one file shipped in several builds
 * counts in each); lines: [from, to] of the defining function in files[0], when one answers.
 */
export const QUESTIONS = [
  // undici
  { pkg: 'undici', q: 'How long does the retry handler wait before retrying a failed request?', files: ['lib/handler/retry-handler.js'], lines: [228, 290] },
  { pkg: 'undici', q: 'Where is the Set-Cookie header parsed?', files: ['lib/web/cookies/parse.js'], lines: [14, 40] },
  { pkg: 'undici', q: 'How does the mock agent find the registered interceptor that matches a request?', files: ['lib/mock/mock-utils.js'], lines: [141, 200] },
  { pkg: 'undici', q: 'Which headers are dropped when a redirect is followed to another origin?', files: ['lib/handler/redirect-handler.js'], lines: [220, 270] },
  { pkg: 'undici', q: 'Where does fetch parse data: URLs?', files: ['lib/web/fetch/data-url.js'], lines: [21, 120] },
  { pkg: 'undici', q: 'Where are outgoing websocket frames masked?', files: ['lib/web/websocket/frame.js'], lines: [21, 100] },
  // htmlparser2
  { pkg: 'htmlparser2', q: 'Where does the tokenizer handle the character right after a < that starts a tag?', files: ['src/Tokenizer.ts', 'dist/esm/Tokenizer.js', 'dist/commonjs/Tokenizer.js'], lines: [381, 409] },
  { pkg: 'htmlparser2', q: 'Which tags does the parser treat as void elements?', files: ['src/Parser.ts', 'dist/esm/Parser.js', 'dist/commonjs/Parser.js'], lines: [68, 90] },
  { pkg: 'htmlparser2', q: 'How does the parser close elements implicitly when a new tag opens, like a p before a div?', files: ['src/Parser.ts', 'dist/esm/Parser.js', 'dist/commonjs/Parser.js'], lines: [277, 320] },
  { pkg: 'htmlparser2', q: 'Where are processing instructions given their name?', files: ['src/Parser.ts', 'dist/esm/Parser.js', 'dist/commonjs/Parser.js'], lines: [452, 465] },
  // cheerio
  { pkg: 'cheerio', q: 'Where is addClass implemented?', files: ['src/api/attributes.ts', 'dist/esm/api/attributes.js', 'dist/commonjs/api/attributes.js', 'dist/browser/api/attributes.js'], lines: [948, 1000] },
  { pkg: 'cheerio', q: 'How are form fields turned into name/value pairs by serializeArray?', files: ['src/api/forms.ts', 'dist/esm/api/forms.js', 'dist/commonjs/api/forms.js', 'dist/browser/api/forms.js'], lines: [54, 110] },
  { pkg: 'cheerio', q: 'Find where the closest ancestor matching a selector is found', files: ['src/api/traversing.ts', 'dist/esm/api/traversing.js', 'dist/commonjs/api/traversing.js', 'dist/browser/api/traversing.js'], lines: [343, 380] },
  { pkg: 'cheerio', q: 'Where are classes removed from elements?', files: ['src/api/attributes.ts', 'dist/esm/api/attributes.js', 'dist/commonjs/api/attributes.js', 'dist/browser/api/attributes.js'], lines: [1016, 1080] },
  // pino
  { pkg: 'pino', q: 'Where does pino redact sensitive paths from log objects?', files: ['lib/redaction.js'], lines: [12, 60] },
  { pkg: 'pino', q: 'How does the logger decide whether a level is enabled?', files: ['lib/levels.js'], lines: [114, 125] },
  { pkg: 'pino', q: 'Where are child loggers created with their bindings?', files: ['lib/proto.js'], lines: [85, 150] },
  { pkg: 'pino', q: 'How is a transport started in a worker thread?', files: ['lib/transport.js'], lines: [192, 260] },
  { pkg: 'pino', q: 'Where is a log line serialized to JSON?', files: ['lib/tools.js'], lines: [123, 200] },
  // ioredis
  { pkg: 'ioredis', q: 'How long does the client wait before reconnecting after the connection closes?', files: ['built/redis/event_handler.js', 'built/redis/RedisOptions.js'], lines: [180, 200] },
  { pkg: 'ioredis', q: 'Where does the pipeline send its queued commands?', files: ['built/Pipeline.js'], lines: [234, 330] },
  { pkg: 'ioredis', q: 'Where are redis:// connection URLs parsed?', files: ['built/utils/index.js'], lines: [201, 277] },
  { pkg: 'ioredis', q: 'How does auto pipelining batch commands together?', files: ['built/autoPipelining.js'], lines: [115, 180] },
  // semver
  { pkg: 'semver', q: 'Where is a version incremented, for example a minor bump?', files: ['classes/semver.js', 'functions/inc.js'], lines: [210, 330] },
  { pkg: 'semver', q: 'How does semver check whether a version satisfies a range?', files: ['classes/range.js', 'functions/satisfies.js'], lines: [196, 215] },
  { pkg: 'semver', q: 'Where is a loose string coerced into a version?', files: ['functions/coerce.js'], lines: [7, 60] },
  { pkg: 'semver', q: 'How are prerelease identifiers compared?', files: ['classes/semver.js', 'internal/identifiers.js'], lines: [151, 180] },
  // turndown
  { pkg: 'turndown', q: 'Where are markdown special characters escaped?', files: ['lib/turndown.cjs.js', 'lib/turndown.es.js', 'lib/turndown.umd.js', 'lib/turndown.browser.cjs.js', 'lib/turndown.browser.es.js', 'lib/turndown.browser.umd.js', 'dist/turndown.js'], lines: [54, 60] },
  { pkg: 'turndown', q: 'Which rule converts HTML headings to markdown?', files: ['lib/turndown.cjs.js', 'lib/turndown.es.js', 'lib/turndown.umd.js', 'lib/turndown.browser.cjs.js', 'lib/turndown.browser.es.js', 'lib/turndown.browser.umd.js', 'dist/turndown.js'], lines: [73, 95] },
  // bullmq
  { pkg: 'bullmq', q: 'Where does a worker extend the locks of the jobs it is processing?', files: ['dist/cjs/classes/lock-manager.js', 'dist/esm/classes/lock-manager.js'], lines: [31, 60] },
  { pkg: 'bullmq', q: 'How is the backoff delay of a failed job calculated?', files: ['dist/cjs/classes/backoffs.js', 'dist/esm/classes/backoffs.js'], lines: [16, 40] },
  { pkg: 'bullmq', q: 'Where is the next run time of a repeatable job computed?', files: ['dist/cjs/classes/repeat.js', 'dist/esm/classes/repeat.js'], lines: [178, 210] },
  // express
  { pkg: 'express', q: 'Where does res.redirect set the Location header and status?', files: ['lib/response.js'], lines: [815, 860] },
  { pkg: 'express', q: 'How does the app start listening on a port?', files: ['lib/application.js'], lines: [598, 615] },
  { pkg: 'express', q: 'Where are cookies set on the response?', files: ['lib/response.js'], lines: [748, 800] },
].map((x, i) => ({ ...x, id: `${x.pkg}-${i + 1}`, split: i % 3 === 2 ? 'held_out' : 'dev' }));

export async function prerequisites() {
  const missing = [];
  if (!existsSync(join(DIST, 'src', 'models', 'builtin', 'index.js'))) missing.push('dist/ is not built (make build)');
  for (const pkg of new Set(QUESTIONS.map((q) => q.pkg))) if (!existsSync(join(MODULES, pkg, 'package.json'))) missing.push(`node_modules/${pkg} is not installed (npm ci)`);
  return missing;
}

async function engine() {
  const { createBuiltinProvider } = await import('../dist/src/models/builtin/index.js');
  const { runTool } = await import('../dist/sandbox/tools/index.js');
  const { buildCanonicalInput } = await import('../dist/src/contracts/canonical.js');
  const { normalizeToolInput } = await import('../dist/src/contracts/tool-input.js');
  const { SCHEMA, OUTPUT_CAPS } = await import('../dist/src/contracts/constants.js');
  const prompts = await import('../dist/src/contracts/prompts.js');
  const { candidateTools } = await import('../dist/src/workflow/candidate-stage.js');
  const { checkCitations } = await import('../dist/src/workflow/citations.js');
  const { validateEvaluationText } = await import('../dist/src/workflow/evaluation-schema.js');
  const strategies = ['content-search', 'path-search', 'definition-search'];
  const capBytes = (text) => Buffer.byteLength(JSON.stringify(text));

  /** One candidate as the child's agent loop runs it: tool turns, then one compression turn when over the cap. */
  async function candidate(strategy, root, input) {
    const provider = createBuiltinProvider(strategy);
    const toolNames = candidateTools('investigate');
    const tools = toolNames.map((name) => ({ name, description: name, parameters: { type: 'object' } }));
    const msgs = prompts.messages(prompts.candidateSystemPrompt('investigate', toolNames), prompts.candidateUserPrompt(input));
    for (let turn = 0; turn < 40; turn += 1) {
      const res = await provider.complete({ role: 'candidate', taskId: 'bench', messages: msgs, tools });
      if (res.toolCalls.length === 0) {
        if (capBytes(res.content) <= OUTPUT_CAPS.candidateBytes) return res.content;
        const shorter = await provider.complete({ role: 'candidate', taskId: 'bench', messages: [...msgs, { role: 'assistant', content: res.content }, { role: 'user', content: prompts.COMPRESSION_PROMPT }], tools: [] });
        return shorter.content;
      }
      msgs.push({ role: 'assistant', content: res.content, tool_calls: res.toolCalls });
      for (const call of res.toolCalls) {
        const result = await runTool(call.name, root, JSON.parse(call.arguments));
        msgs.push({ role: 'tool', tool_call_id: call.id, name: call.name, content: result.ok ? result.text : result.error });
      }
    }
    throw new Error(`${strategy} did not answer within 40 turns`);
  }

  /** The workflow's stages after the candidates, with its own citation checks; returns the merged answer. */
  async function fuse(root, question, rotate) {
    // Background and deliverable as a user writes them: the package, and what to hand back.
    const args = { objective: question.q, background: [`Questions about the ${question.pkg} npm package`], deliverable: 'The file and lines that implement it' };
    const input = buildCanonicalInput({ workflow: 'investigate', cwd: root, args: normalizeToolInput('investigate', args) });
    const answers = await Promise.all(strategies.map((s) => candidate(s, root, input)));
    // The workflow shuffles slots behind the letters; a fixed rotation per question stands in for it.
    const blind = ['A', 'B', 'C'].map((id, i) => ({ candidate_id: id, response: answers[(i + rotate) % 3] }));
    const checks = Object.fromEntries(await Promise.all(blind.map(async (c) => [c.candidate_id, await checkCitations(root, c.response)])));
    const blindInput = { schema_version: SCHEMA.blindCandidates, canonical_input: input, candidates: blind, citation_checks: checks };
    const evaluator = createBuiltinProvider('content-search');
    const evaluated = await evaluator.complete({ role: 'evaluator', taskId: 'bench', messages: prompts.messages(prompts.evaluatorSystemPrompt(), prompts.evaluatorUserPrompt(blindInput)), tools: [] });
    const evaluation = validateEvaluationText(evaluated.content);
    if (!evaluation.ok) throw new Error(`evaluation invalid: ${evaluation.errors.join('; ')}`);
    const withoutActual = Object.fromEntries(Object.entries(checks).map(([id, list]) => [id, list.map((check) => Object.fromEntries(Object.entries(check).filter(([k]) => k !== 'actual')))]));
    const mergeInput = { schema_version: SCHEMA.mergeInput, canonical_input: input, candidates: blind, evaluation: evaluation.evaluation, citation_checks: withoutActual };
    const merged = await evaluator.complete({ role: 'merger', taskId: 'bench', messages: prompts.messages(prompts.mergerSystemPrompt(), prompts.mergerUserPrompt(mergeInput)), tools: [] });
    const answer = merged.content.trim();
    const delivered = await checkCitations(root, answer);
    return { answer, candidates: answers, unconfirmed: delivered.filter((c) => c.status !== 'verified').length };
  }
  return { fuse };
}

/** Score one answer: does its lead name an expected file, and cite a line of the definition? */
export function scoreLead(answer, question, leadChars = LEAD_CHARS) {
  const lead = answer.slice(0, leadChars);
  const named = (text, file) => new RegExp(`(^|[\\s\`(/])${file.replace(/[.*+?^${}()|[\]\\]/gu, '\\$&')}(?=[\`:\\s),.]|$)`, 'mu').test(text);
  const leadFile = question.files.find((f) => named(lead, f)) ?? null;
  const citesDefinition = (text) =>
    question.lines !== undefined &&
    [...text.matchAll(/`([^`\s]+):(\d+)`/gu)].some((m) => m[1] === question.files[0] && Number(m[2]) >= question.lines[0] && Number(m[2]) <= question.lines[1]);
  return { leadFile: leadFile !== null, leadLine: citesDefinition(lead), anywhere: question.files.some((f) => named(answer, f)), lineAnywhere: citesDefinition(answer) };
}

/** One question's merged answer and candidate answers, for looking into a miss. */
export async function answerOf(question, rotate = 0) {
  const { fuse } = await engine();
  return fuse(realpathSync(join(MODULES, question.pkg)), question, rotate);
}

function tally(rows) {
  const n = rows.length;
  const count = (k) => rows.filter((r) => r[k]).length;
  const withLines = rows.filter((r) => r.hasLines);
  return {
    questions: n,
    lead_file: count('leadFile'),
    lead_file_ratio: n === 0 ? 0 : Math.round((count('leadFile') / n) * 1000) / 1000,
    lead_line: withLines.filter((r) => r.leadLine).length,
    lead_line_of: withLines.length,
    anywhere: count('anywhere'),
    line_anywhere: withLines.filter((r) => r.lineAnywhere).length,
  };
}

export default async function run() {
  const { fuse } = await engine();
  const chosen = SHORT ? QUESTIONS.filter((_, i) => i % 5 === 0) : QUESTIONS;
  const rows = [];
  const t0 = performance.now();
  for (const [i, question] of chosen.entries()) {
    const root = realpathSync(join(MODULES, question.pkg));
    const { answer, unconfirmed } = await fuse(root, question, i % 3);
    const s = scoreLead(answer, question);
    const lead = answer.slice(0, LEAD_CHARS);
    rows.push({ id: question.id, split: question.split, ...s, hasLines: question.lines !== undefined, unconfirmed, ...(s.leadFile ? {} : { lead_text: lead }) });
  }
  const wall = performance.now() - t0;
  const all = tally(rows);
  const unconfirmed = rows.reduce((n, r) => n + r.unconfirmed, 0);
  if (unconfirmed > 0) throw new Error(`${unconfirmed} citations of the merged answers failed the workflow's check`);
  return {
    unit: 'questions',
    short: SHORT,
    packages: [...new Set(chosen.map((q) => q.pkg))].length,
    lead_chars: LEAD_CHARS,
    score: all.lead_file_ratio,
    all,
    dev: tally(rows.filter((r) => r.split === 'dev')),
    held_out: tally(rows.filter((r) => r.split === 'held_out')),
    ms_per_question: Math.round(wall / Math.max(1, rows.length)),
    misses: rows.filter((r) => !r.leadFile).map((r) => ({ id: r.id, q: QUESTIONS.find((x) => x.id === r.id)?.q, lead: r.lead_text })),
    line_misses: rows.filter((r) => r.leadFile && r.hasLines && !r.leadLine).map((r) => r.id),
  };
}
