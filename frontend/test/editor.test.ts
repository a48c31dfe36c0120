// The editor's help: names resolved through the program's imports, signatures made readable and split,
// syntax errors found by the parser, and drafts kept per page.
import { python } from "@codemirror/lang-python";
import { EditorState } from "@codemirror/state";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { activeParam, compactSignature, docNodes, signatureParams } from "../src/editor/api_doc_text";
import { ApiIndex, importAliases } from "../src/editor/api_index";
import { Drafts } from "../src/editor/drafts";
import { syntaxErrorLines } from "../src/editor/syntax_marks";

describe("importAliases", () => {
  it("binds what each import names", () => {
    const aliases = importAliases(
      "import jax\nimport jax.numpy as jnp\nfrom jax import jit, grad as g\nfrom jax.random import (key, split)\nimport os.path\n");
    expect(Object.fromEntries(aliases)).toEqual({
      jax: "jax", jnp: "jax.numpy", jit: "jax.jit", g: "jax.grad", key: "jax.random.key", split: "jax.random.split",
      os: "os",
    });
  });

  it("ignores star imports and lines that are not imports", () => {
    expect(importAliases("from jax.numpy import *\nx = 1  # import y\n").size).toBe(0);
  });
});

describe("ApiIndex.resolve", () => {
  const index = new ApiIndex();
  index.data = {
    format: 1, jax_version: "0.6.2", versions: {},
    modules: {
      jax: { jit: { k: "function", s: "(fun)", d: "Compile fun." }, numpy: { k: "module", d: "NumPy on JAX." } },
      "jax.numpy": { sum: { k: "function", s: "(a, axis=None)" } },
    },
  };
  const code = "import jax\nimport jax.numpy as jnp\nfrom jax import jit\n";

  it("resolves a dotted name through the program's aliases", () => {
    expect(index.resolve("jnp.sum", code)).toEqual({ path: "jax.numpy.sum", entry: { k: "function", s: "(a, axis=None)" } });
    expect(index.resolve("jit", code)?.path).toBe("jax.jit");
  });

  it("resolves a module to its docstring and knows nothing of names the index lacks", () => {
    expect(index.resolve("jnp", code)).toEqual({ path: "jax.numpy", entry: { k: "module", d: "NumPy on JAX." } });
    expect(index.resolve("jnp.nothing", code)).toBeNull();
    expect(index.resolve("np.sum", code)).toBeNull(); // np is not imported
  });
});

describe("signatures as a person reads them", () => {
  it("drops module paths of type names, writes unions with | and hides object addresses", () => {
    expect(compactSignature("(x: jax._src.typing.ArrayLike, dtype: Union[jax._src.typing.DTypeLike, NoneType] = None)"))
      .toBe("(x: ArrayLike, dtype: DTypeLike | None = None)");
    expect(compactSignature("(a, *, where=<object object at 0x7f00>, f=<function identity at 0x7f01>)"))
      .toBe("(a, *, where=…, f=identity)");
    expect(compactSignature("(dtype=jnp.float32)")).toBe("(dtype=jnp.float32)"); // a value keeps its module
  });

  it("splits parameters by kind, keeping commas inside brackets, and keeps what follows the list", () => {
    const { params, tail } = signatureParams("(a, /, b: tuple[int, int] = (1, 2), *args, c, **kw) -> Array");
    expect(params.map((p) => [p.name, p.kind])).toEqual([
      ["a", "positional"], [null, "marker"], ["b", "positional"], ["args", "varargs"], ["c", "keyword"], ["kw", "varkw"],
    ]);
    expect(params[2].text).toBe("b: tuple[int, int] = (1, 2)");
    expect(tail).toBe(" -> Array");
  });

  it("marks the parameter an argument fills, by position or by keyword", () => {
    const { params } = signatureParams("(a, b, *args, c=1, **kw)");
    expect(activeParam(params, 1, null)).toBe(1);
    expect(activeParam(params, 5, null)).toBe(2); // extra positional arguments go to *args
    expect(activeParam(params, 0, "c")).toBe(3);
    expect(activeParam(params, 0, "zzz")).toBe(4); // an unknown keyword goes to **kw
    expect(activeParam(signatureParams("(a)").params, 1, null)).toBe(-1);
  });

  it("draws Sphinx roles and literals in a docstring as code", () => {
    const nodes = docNodes("Like :func:`~jax.numpy.sum` with ``axis``.");
    expect(nodes.map((n) => (typeof n === "string" ? n : `<${n.textContent}>`))).toEqual(["Like ", "<sum>", " with ", "<axis>", "."]);
  });
});

describe("syntaxErrorLines", () => {
  const lines = (code: string) => syntaxErrorLines(EditorState.create({ doc: code, extensions: [python()] }));

  it("finds no error in valid Python", () => {
    expect(lines("import jax\n\ndef f(x):\n    return x * 2\n")).toEqual([]);
  });

  it("marks the line the parser could not read", () => {
    expect(lines("x = 1\ny = (2 +\nprint(x))\nz = 3 3\n")).toContain(4);
    expect(lines("def f(:\n    pass\n")[0]).toBe(1);
  });
});

describe("Drafts", () => {
  beforeEach(() => {
    localStorage.clear();
    vi.useFakeTimers();
  });
  afterEach(() => vi.useRealTimers());

  it("keeps one draft for the blank editor and one per snippet, written after a pause", () => {
    const drafts = new Drafts();
    drafts.save(null, "print(1)", null);
    expect(localStorage.getItem("jaxplay.draft")).toBeNull(); // edits come in bursts
    vi.advanceTimersByTime(400);
    expect(drafts.load(null, null)).toBe("print(1)");
    drafts.save("abc", "print(2)", "print(0)");
    drafts.flush();
    expect(localStorage.getItem("jaxplay.draft.s.abc")).toBe("print(2)");
    expect(drafts.load("abc", "print(0)")).toBe("print(2)");
  });

  it("is no draft when it equals the shared code, and is forgotten once its edits become a new link", () => {
    const drafts = new Drafts();
    localStorage.setItem("jaxplay.draft.s.abc", "old edit");
    drafts.save("abc", "shared", "shared");
    drafts.flush();
    expect(localStorage.getItem("jaxplay.draft.s.abc")).toBeNull();
    drafts.save(null, "typed", null);
    drafts.forget(null);
    vi.advanceTimersByTime(1000);
    expect(localStorage.getItem("jaxplay.draft")).toBeNull();
  });
});
