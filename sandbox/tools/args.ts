/**
 * Strict validation of tool arguments: a plain object, only known keys, typed fields.
 * Messages name the tool and the field (`read.limit must be an integer between 1 and 2000`).
 * `null` counts as "not provided" for optional fields, because function-calling models in
 * strict mode send optional parameters as null.
 */

export class ToolArgError extends Error {
  override readonly name = 'ToolArgError';
}

export type FieldSpec =
  | { type: 'string'; required?: boolean; nonEmpty?: boolean; nonBlank?: boolean; maxChars?: number }
  | { type: 'integer'; required?: boolean; min: number; max: number }
  | { type: 'boolean'; required?: boolean }
  | { type: 'enum'; required?: boolean; values: readonly string[] };

type FieldValue<F extends FieldSpec> = F extends { type: 'string' }
  ? string
  : F extends { type: 'integer' }
    ? number
    : F extends { type: 'boolean' }
      ? boolean
      : F extends { type: 'enum'; values: readonly (infer V)[] }
        ? V
        : never;

export type ParsedArgs<S extends Record<string, FieldSpec>> = {
  [K in keyof S]: S[K] extends { required: true } ? FieldValue<S[K]> : FieldValue<S[K]> | undefined;
};

export function parseArgs<S extends Record<string, FieldSpec>>(tool: string, spec: S, args: unknown): ParsedArgs<S> {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) {
    throw new ToolArgError(`${tool} arguments must be an object`);
  }
  const record = args as Record<string, unknown>;
  const unknownKeys = Object.keys(record).filter((k) => !Object.prototype.hasOwnProperty.call(spec, k));
  if (unknownKeys.length > 0) {
    throw new ToolArgError(`${tool} contains unsupported key(s): ${unknownKeys.sort().join(', ')}`);
  }
  const missing = Object.keys(spec).filter((k) => spec[k]?.required === true && (record[k] === undefined || record[k] === null));
  if (missing.length > 0) {
    throw new ToolArgError(`${tool} missing required key(s): ${missing.join(', ')}`);
  }
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(spec)) {
    const value = record[key];
    if (value === undefined || value === null) {
      out[key] = undefined;
      continue;
    }
    out[key] = checkField(`${tool}.${key}`, field, value);
  }
  return out as ParsedArgs<S>;
}

function checkField(label: string, field: FieldSpec, value: unknown): unknown {
  switch (field.type) {
    case 'string': {
      if (typeof value !== 'string') throw new ToolArgError(`${label} must be a string`);
      if (field.nonEmpty === true && value === '') throw new ToolArgError(`${label} must not be empty`);
      if (field.nonBlank === true && value.trim() === '') throw new ToolArgError(`${label} must not be blank`);
      if (field.maxChars !== undefined && value.length > field.maxChars) {
        throw new ToolArgError(`${label} must be at most ${field.maxChars} characters`);
      }
      return value;
    }
    case 'integer': {
      if (typeof value !== 'number' || !Number.isInteger(value) || value < field.min || value > field.max) {
        throw new ToolArgError(`${label} must be an integer between ${field.min} and ${field.max}`);
      }
      return value;
    }
    case 'boolean': {
      if (typeof value !== 'boolean') throw new ToolArgError(`${label} must be a boolean`);
      return value;
    }
    case 'enum': {
      if (typeof value !== 'string' || !field.values.includes(value)) {
        throw new ToolArgError(`${label} must be one of: ${field.values.join(', ')}`);
      }
      return value;
    }
  }
}
