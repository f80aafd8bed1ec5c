import { FusionClient } from 'fusion-supervisor';

const client = new FusionClient({ embedded: true }); // the running daemon, else one in this process
const receipt = await client.investigate(
  { objective: 'Find where the token bucket refills tokens', background: ['Clients see bursts after a pause'], deliverable: 'The file and lines that implement the refill' },
  { repo: process.argv[2] ?? process.cwd() },
);
for await (const { kind, data } of client.events(receipt.taskId)) {
  if (kind === 'transition') console.error(`state: ${String(data.to)}`);
  else if (kind === 'progress' && data.stage !== undefined) console.error(`  ${String(data.stage)} attempt ${String(data.attempt)}: ${String(data.event)}`);
}
const result = await client.result(receipt.taskId);
console.log(result.answer.present ? `${result.answer.header}\n\n${result.answer.text ?? result.answer.path}` : `no answer: ${result.status}`);
await client.close();
