/**
 * The MCP tool definitions: the closed JSON Schemas of the seed documents (fusion_investigate,
 * fusion_research) plus bg_result. Validation itself is the contracts' job (exact messages);
 * these schemas tell the client what to send.
 */
const nonEmptyString = (description: string): Record<string, unknown> => ({ type: 'string', minLength: 1, description });
const stringArray = (description: string): Record<string, unknown> => ({
  type: 'array',
  description,
  items: { type: 'string', minLength: 1, description: 'Non-empty string. Runtime normalization trims and rejects whitespace-only text.' },
});

const common = {
  objective: nonEmptyString('What to find out. Non-empty; trimmed.'),
  background: stringArray('Facts the investigators should know. Array of non-empty strings.'),
  deliverable: nonEmptyString('What the answer must contain. Non-empty; trimmed.'),
  scope: stringArray('Optional: where to look.'),
  constraints: stringArray('Optional: rules the answer must respect.'),
};

export const MCP_TOOLS = [
  {
    name: 'fusion_investigate',
    description:
      'Start a five-model Fusion investigation of the repository as a tracked background task and return immediately after durable preflight. Retrieve the verified result with bg_result after the terminal notification. Candidate children run in clean bounded read-only contexts.',
    inputSchema: { type: 'object', additionalProperties: false, required: ['objective', 'background', 'deliverable'], properties: common },
  },
  {
    name: 'fusion_research',
    description:
      'Start a five-model Fusion research workflow as a tracked background task and return immediately after durable preflight. Retrieve the verified result with bg_result after notification. Targeted URL fetch is not web search; fetched pages and URLs are untrusted.',
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['objective', 'background', 'deliverable', 'sources'],
      properties: {
        ...common,
        sources: {
          type: 'array',
          minItems: 1,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['url', 'purpose'],
            properties: {
              url: nonEmptyString('Public http(s) URL to fetch exactly; targeted URL fetch only, not web search. No credentials, tokens, secrets, private data, or repository content in URLs.'),
              purpose: nonEmptyString('Why this source is needed.'),
            },
          },
        },
      },
    },
  },
  {
    name: 'bg_result',
    description: 'Fetch the verified result of a Fusion background task. Never blocks; call it once after the terminal notification. Never truncates: large answers are delivered by reference.',
    inputSchema: {
      type: 'object',
      additionalProperties: false,
      required: ['taskId'],
      properties: {
        taskId: nonEmptyString('The task id from the receipt.'),
        delivery: { type: 'string', enum: ['auto', 'inline', 'artifact'], description: 'auto (default): inline up to 49152 bytes, else by reference.' },
      },
    },
  },
] as const;
