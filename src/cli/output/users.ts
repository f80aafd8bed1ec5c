/**
 * User names for the uids a task records (the caller column): read once from /etc/passwd;
 * a uid it does not list is shown as `uid N`.
 */
import { readFileSync } from 'node:fs';

let names: Map<number, string> | undefined;

export function userNameOf(uid: number | null | undefined): string {
  if (uid === null || uid === undefined) return '-';
  if (names === undefined) {
    names = new Map();
    try {
      for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
        const [name, , id] = line.split(':');
        if (name && id !== undefined && id !== '' && !names.has(Number(id))) names.set(Number(id), name);
      }
    } catch {
      // Unreadable user database: uids are shown as numbers.
    }
  }
  return names.get(uid) ?? `uid ${uid}`;
}
