/**
 * Embeds run inside other sites' pages, where a browser that blocks
 * third-party storage makes every `localStorage` access throw
 * ("Access is denied for this document"). The page keeps preferences there
 * (split position, backend, inspect toggle), so such an embed would fail to
 * start. When storage is unusable, this module puts an in-memory Storage in
 * its place for the life of the page: preferences then simply are not kept.
 *
 * It runs when imported; share.ts imports it, and ES modules finish
 * evaluating every import before the entry module builds the page.
 */

class MemoryStorage implements Storage {
  private readonly items = new Map<string, string>();

  get length(): number {
    return this.items.size;
  }

  clear(): void {
    this.items.clear();
  }

  getItem(key: string): string | null {
    return this.items.get(String(key)) ?? null;
  }

  key(index: number): string | null {
    return [...this.items.keys()][index] ?? null;
  }

  removeItem(key: string): void {
    this.items.delete(String(key));
  }

  setItem(key: string, value: string): void {
    this.items.set(String(key), String(value));
  }
}

export function storageUsable(): boolean {
  try {
    const storage = window.localStorage;
    const probe = "jaxplay.storage-probe";
    storage.setItem(probe, "1");
    storage.removeItem(probe);
    return true;
  } catch {
    return false;
  }
}

export function ensureUsableStorage(): boolean {
  if (storageUsable()) return true;
  Object.defineProperty(window, "localStorage", { value: new MemoryStorage(), configurable: true });
  return false;
}

ensureUsableStorage();
