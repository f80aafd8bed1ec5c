/**
 * What a person sees when a task is submitted from the terminal. The receipt's own text is
 * addressed to agents (call bg_result, do not poll: docs/behaviour.md#f1) and stays in the
 * MCP reply and in --json; a terminal gets the id and the commands that follow it.
 */

interface ReceiptLike {
  taskId: unknown;
  state?: unknown;
}

/** A submit without --wait (stdout): the id first, then how to follow it and read the answer. */
export function submittedLines(receipt: ReceiptLike): string {
  const id = String(receipt.taskId);
  return (
    `Submitted ${id} (${String(receipt.state ?? 'queued')}); it runs in the daemon whether or not you follow it.\n` +
    `  follow:  fusion logs ${id} --follow\n` +
    `  wait:    fusion wait ${id}\n` +
    `  answer:  fusion result ${id}\n`
  );
}

/** A submit with --wait (stderr, before the progress lines). */
export function followingLine(receipt: ReceiptLike): string {
  return `Submitted ${String(receipt.taskId)}; following its progress (elapsed time since submission in brackets).\n`;
}
