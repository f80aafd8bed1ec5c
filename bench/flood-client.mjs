// The flood bench's client, in a process of its own (as real callers are): sends COUNT
// requests over a Unix socket, CONCURRENT at a time (COUNT = CONCURRENT for a flood, 1 for the
// single-client baseline), and prints `{samples, codes}` as one JSON line on stdout.
// Usage: node bench/flood-client.mjs SOCKET COUNT CONCURRENT BODY_JSON
import process from 'node:process';
import { Buffer } from 'node:buffer';
import { request } from 'node:http';
import { performance } from 'node:perf_hooks';

const [socketPath, countArg, concurrentArg, bodyJson] = process.argv.slice(2);
const count = Number(countArg);
const concurrent = Number(concurrentArg);
const payload = Buffer.from(bodyJson);

function once() {
  return new Promise((resolve) => {
    const s = performance.now();
    const req = request(
      { socketPath, method: 'POST', path: '/v1/tasks/investigate', agent: false, headers: { 'content-type': 'application/json', 'content-length': payload.length } },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          let code = String(res.statusCode);
          if (res.statusCode === 202) code = 'accepted';
          else {
            try {
              code = JSON.parse(Buffer.concat(chunks).toString('utf8')).error.code;
            } catch {
              /* a floor reply or a non-envelope: the status stands */
            }
          }
          resolve({ ms: performance.now() - s, code });
        });
      },
    );
    req.on('error', (err) => resolve({ ms: performance.now() - s, code: `transport:${err.code ?? err.message}` }));
    req.end(payload);
  });
}

const samples = [];
const codes = {};
let next = 0;
await Promise.all(
  Array.from({ length: concurrent }, async () => {
    while (next < count) {
      next += 1;
      const r = await once();
      samples.push(r.ms);
      codes[r.code] = (codes[r.code] ?? 0) + 1;
    }
  }),
);
process.stdout.write(`${JSON.stringify({ samples, codes })}\n`);
