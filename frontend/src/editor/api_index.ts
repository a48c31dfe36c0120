/**
 * The API index of the JAX the chosen backend runs (GET /api/api-index/{version},
 * made by sandbox/learning/api_index.py), and resolving the names in a program against
 * it: `jnp.sum` is `jax.numpy.sum` when the program says `import jax.numpy as jnp`.
 *
 * The index (a few hundred kB) is fetched when completion, signature help or hover docs first
 * need it, not with the page.
 */

export interface ApiEntry {
  /** function, class, module or value. */
  k: "function" | "class" | "module" | "value";
  /** Signature, e.g. "(a: ArrayLike, axis: Axis = None) -> Array". */
  s?: string;
  /** First line of the docstring. */
  d?: string;
}

export interface ApiIndexData {
  format: number;
  jax_version: string;
  versions: Record<string, string>;
  modules: Record<string, Record<string, ApiEntry>>;
}

export interface ResolvedName {
  /** The full dotted name, e.g. "jax.numpy.sum". */
  path: string;
  entry: ApiEntry;
}

const IMPORT_AS = /^[ \t]*import[ \t]+([\w.]+)(?:[ \t]+as[ \t]+(\w+))?/;
const FROM_IMPORT = /^[ \t]*from[ \t]+([\w.]+)[ \t]+import[ \t]+\(?([^)#\n]+)/;

/** What each name bound by the program's imports stands for: "jnp" -> "jax.numpy", "jit" -> "jax.jit". */
export function importAliases(code: string): Map<string, string> {
  const aliases = new Map<string, string>();
  for (const line of code.split("\n")) {
    const plain = IMPORT_AS.exec(line);
    if (plain) {
      const [, module, alias] = plain;
      if (alias) aliases.set(alias, module);
      else aliases.set(module.split(".")[0], module.split(".")[0]);
      continue;
    }
    const from = FROM_IMPORT.exec(line);
    if (!from) continue;
    for (const part of from[2].split(",")) {
      const words = part.trim().split(/\s+/);
      if (!words[0] || words[0] === "*") continue;
      aliases.set(words.length === 3 && words[1] === "as" ? words[2] : words[0], `${from[1]}.${words[0]}`);
    }
  }
  return aliases;
}

export class ApiIndex {
  data: ApiIndexData | null = null;
  /** Called when an index has arrived (signature help draws again). */
  readonly onLoad: Array<() => void> = [];
  /** The version whose names help offers: the JAX the code will run on. */
  private version: string | null = null;
  private requested: string | null = null;
  private pending: Promise<void> | null = null;
  /** Help asked for the index once: later version changes fetch theirs at once. */
  private needed = false;
  private aliasesFor: { code: string; aliases: Map<string, string> } | null = null;

  /** The JAX version help should follow. Nothing is fetched until help first needs it (`ensure`). */
  use(jaxVersion: string): void {
    this.version = jaxVersion;
    if (this.needed) void this.ensure();
  }

  /** Fetches the chosen version's index once; resolves when it is there (or known to be missing). */
  ensure(): Promise<void> {
    this.needed = true;
    const version = this.version;
    if (version === null) return Promise.resolve();
    if (this.requested !== version || !this.pending) {
      this.requested = version;
      this.pending = this.load(version);
    }
    return this.pending;
  }

  /** An index the server does not have leaves help off. */
  private async load(jaxVersion: string): Promise<void> {
    try {
      const response = await fetch(`/api/api-index/${encodeURIComponent(jaxVersion)}`);
      if (!response.ok) throw new Error(`HTTP ${response.status}`);
      const data = (await response.json()) as ApiIndexData;
      if (this.requested === jaxVersion) this.data = data;
    } catch (err) {
      console.warn(`jaxplay: no API index for jax ${jaxVersion}; completion from it is off`, err);
      if (this.requested === jaxVersion) this.data = null;
    }
    for (const listener of this.onLoad) listener();
  }

  private aliases(code: string): Map<string, string> {
    if (this.aliasesFor?.code !== code) this.aliasesFor = { code, aliases: importAliases(code) };
    return this.aliasesFor.aliases;
  }

  /** The module a dotted expression names ("jnp", "jax.random"), or null. */
  module(dotted: string, code: string): string | null {
    const modules = this.data?.modules;
    if (!modules) return null;
    const [first, ...rest] = dotted.split(".");
    let path = this.aliases(code).get(first) ?? null;
    if (path === null) return null;
    for (const part of rest) path = `${path}.${part}`;
    return modules[path] ? path : null;
  }

  /** The entry a dotted name ("jnp.sum", "jit", "jax.random") stands for, or null. */
  resolve(dotted: string, code: string): ResolvedName | null {
    const modules = this.data?.modules;
    if (!modules) return null;
    const asModule = this.module(dotted, code);
    if (asModule) return { path: asModule, entry: { k: "module", d: this.moduleDoc(asModule) } };
    const cut = dotted.lastIndexOf(".");
    if (cut < 0) {
      // A name imported on its own: `from jax import jit`.
      const full = this.aliases(code).get(dotted);
      if (!full) return null;
      const at = full.lastIndexOf(".");
      const entry = modules[full.slice(0, at)]?.[full.slice(at + 1)];
      return entry ? { path: full, entry } : null;
    }
    const module = this.module(dotted.slice(0, cut), code);
    const name = dotted.slice(cut + 1);
    const entry = module ? modules[module][name] : undefined;
    return entry && module ? { path: `${module}.${name}`, entry } : null;
  }

  private moduleDoc(path: string): string | undefined {
    const at = path.lastIndexOf(".");
    if (at < 0) return undefined;
    return this.data?.modules[path.slice(0, at)]?.[path.slice(at + 1)]?.d;
  }
}
