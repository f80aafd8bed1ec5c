/**
 * An auto-escaping HTML template (docs/security.md#dashboard). Every value interpolated into
 * `html\`…\`` is escaped for text and for quoted attribute values alike (& < > " ' and the
 * backtick), unless it is a `Markup` made by this module: the result of another `html` template,
 * or of `join` over markups. Nothing else can make a `Markup` (the brand is a module-private
 * symbol), so a page cannot splice task text, page text or a header into live markup by mistake:
 * forgetting to escape is impossible, escaping twice is harmless.
 *
 * Attribute values must be quoted in the template (`href="${url}"`); an unquoted attribute or a
 * value inside a tag name would still be a hole, so `pages.ts` quotes every one, and URLs it
 * builds come from `hrefTo` (path segments percent-encoded), never from untrusted text.
 */

const MARKUP = Symbol('markup');

export interface Markup {
  readonly [MARKUP]: true;
  readonly text: string;
}

function markup(text: string): Markup {
  return { [MARKUP]: true, text };
}

export function isMarkup(value: unknown): value is Markup {
  return typeof value === 'object' && value !== null && (value as Partial<Markup>)[MARKUP] === true;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

/** The text with every character that can end a text node or a quoted attribute escaped. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/gu, (c) => ESCAPES[c]!);
}

export type Interpolation = Markup | string | number | boolean | null | undefined | readonly Interpolation[];

function render(value: Interpolation): string {
  if (value === null || value === undefined || value === false) return '';
  if (isMarkup(value)) return value.text;
  if (Array.isArray(value)) return (value as readonly Interpolation[]).map(render).join('');
  return escapeHtml(String(value));
}

/** The tagged template: literal parts are the page's own markup, every value is escaped. */
export function html(strings: TemplateStringsArray, ...values: Interpolation[]): Markup {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return markup(out);
}

/** Markups (or escaped values) joined by an escaped separator. */
export function join(values: readonly Interpolation[], separator = ''): Markup {
  return markup(values.map(render).join(escapeHtml(separator)));
}

/** A root-relative link of path segments, each percent-encoded, with an optional query. */
export function hrefTo(segments: readonly string[], query?: Record<string, string | undefined>): string {
  const path = `/${segments.map((s) => encodeURIComponent(s)).join('/')}`;
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) params.set(k, v);
  const q = params.toString();
  return q === '' ? path : `${path}?${q}`;
}
