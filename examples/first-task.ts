import { FusionClient } from 'fusion-supervisor';

const client = new FusionClient({ embedded: true }); // the running daemon, else one in this process
const receipt = await client.investigate(
  { objective: 'Find where the token bucket refills tokens', background: ['Clients see bursts after a pause'], deliverable: 'The file and lines that implement the refill' },
  { repo: process.argv[2] ?? process.cwd() },
);
for await (const event of client.events(receipt.taskId)) console.error(event.kind, event.data.to ?? event.data.summary ?? '');
const result = await client.result(receipt.taskId);
console.log(result.answer.present ? `${result.answer.header}\n\n${result.answer.text ?? result.answer.path}` : `no answer: ${result.status}`);
await client.close();
