// Which `\kernel` the cursor is in. Pure.

const KERNEL_RE = /\\kernel\s*([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)/g;

/** Blanks `%` comments (at line start or after whitespace, as the grammar has it), keeping offsets. */
export function blankComments(text: string): string {
  return text.replace(/(^|[ \t\r\n])%[^\n]*/g, (m, lead: string) => lead + " ".repeat(m.length - lead.length));
}

export interface KernelHeader {
  name: string;
  offset: number;
}

export function kernelHeaders(text: string): KernelHeader[] {
  const out: KernelHeader[] = [];
  for (const m of blankComments(text).matchAll(KERNEL_RE)) out.push({ name: m[1], offset: m.index ?? 0 });
  return out;
}

/**
 * The kernel whose header is the last one at or before `offset` (the first one when the cursor
 * is above every header); null for a file without `\kernel` (a bare Step-TP body).
 */
export function kernelAt(text: string, offset: number): string | null {
  const heads = kernelHeaders(text);
  if (heads.length === 0) return null;
  let best = heads[0];
  for (const h of heads) if (h.offset <= offset) best = h;
  return best.name;
}
