/**
 * Highlighting for what JAX prints at each stage: jaxprs, StableHLO (MLIR)
 * and optimized HLO. No CodeMirror mode exists for these, so each is a small
 * StreamLanguage: line-oriented tokenizers are all these texts need, and a
 * stream parser only tokenizes what is on screen, so a 2 MiB module stays
 * responsive.
 */

import { StreamLanguage, type StreamParser } from "@codemirror/language";

interface IrState {
  /** The next identifier is an operation name (after " = " or an HLO type). */
  expectOp: boolean;
}

const startState = (): IrState => ({ expectOp: false });

const NUMBER = /^-?(?:0x[0-9a-f]+|\d+(?:\.\d*)?(?:e[-+]?\d+)?|inf|nan)\b/i;
const STRING = /^"(?:[^"\\]|\\.)*"|^'(?:[^'\\]|\\.)*'/;

// --- jaxpr --------------------------------------------------------------------

const JAXPR_DTYPE = /^(?:bf16|f8_\w+|f16|f32|f64|i1|i2|i4|i8|i16|i32|i64|u1|u2|u4|u8|u16|u32|u64|c64|c128|bool|float0|key<[^>]*>)\[[^\]]*\]/;

const jaxprParser: StreamParser<IrState> = {
  name: "jaxpr",
  startState,
  token(stream, state) {
    if (stream.eatSpace()) return null;
    if (stream.match(/^#.*/)) return "comment"; // the source annotation
    if (stream.match(JAXPR_DTYPE)) return "typeName";
    if (stream.match(/^-?\d+(?:\.\d*)?(?:e[-+]?\d+)?(?::[\w<>]+\[[^\]]*\])?/i)) return "number";
    if (stream.match(STRING)) return "string";
    if (stream.match(/^(?:lambda|let|in)\b/)) return "keyword";
    if (stream.match(/^(?:True|False|None)\b/)) return "atom";
    if (stream.match(/^[A-Za-z_]\w*(?==)/)) return "propertyName"; // a parameter: new_dtype=float32
    if (stream.match(/^[A-Za-z_][\w.]*/)) {
      if (state.expectOp) {
        state.expectOp = false;
        return "variableName.function"; // the primitive
      }
      return stream.peek() === ":" ? "variableName.definition" : "variableName";
    }
    if (stream.match(/^=(?=\s)/)) {
      state.expectOp = true;
      return "operator";
    }
    stream.next();
    return "punctuation";
  },
};

// --- StableHLO / MLIR -----------------------------------------------------------

const MLIR_KEYWORDS = /^(?:module|func|return|attributes|public|private|dense|dims|cond|do|applies|across|dimensions|init|contracting_dims|batching_dims|precision|to|at|loc|unknown|x)\b/;

const stablehloParser: StreamParser<IrState> = {
  name: "stablehlo",
  startState,
  token(stream) {
    if (stream.eatSpace()) return null;
    if (stream.match(/^\/\/.*/)) return "comment";
    if (stream.match(/^#loc\d*/) || stream.match(/^loc\((?:[^()]|\([^()]*\))*\)/)) return "meta";
    if (stream.match(/^%[\w.#:]+/)) return "variableName";
    if (stream.match(/^\^[\w]+/)) return "labelName";
    if (stream.match(/^@[\w.$-]+/)) return "variableName.definition";
    if (stream.match(/^"?(?:stablehlo|chlo|mhlo|func|sdy|shardy|call|tensor|arith|scf)\.[\w.]+"?/)) {
      return "variableName.function";
    }
    if (stream.match(/^tensor<[^>]*>/) || stream.match(/^!\w+(?:\.\w+)*(?:<[^>]*>)?/)) return "typeName";
    if (stream.match(/^(?:bf16|f8\w*|f16|f32|f64|i1|i4|i8|i16|i32|i64|ui\d+|complex<\w+>|index)\b/)) return "typeName";
    if (stream.match(/^#[\w.]+(?:<[^>]*>)?/)) return "meta";
    if (stream.match(STRING)) return "string";
    if (stream.match(NUMBER)) return "number";
    if (stream.match(/^(?:true|false)\b/)) return "atom";
    if (stream.match(MLIR_KEYWORDS)) return "keyword";
    if (stream.match(/^[A-Za-z_][\w.]*(?=\s*=)/)) return "propertyName";
    if (stream.match(/^[A-Za-z_][\w.]*/)) return "variableName.special";
    stream.next();
    return "punctuation";
  },
};

// --- optimized HLO --------------------------------------------------------------

const HLO_TYPE = /^(?:pred|s\d+|u\d+|f\d+(?:e\d+m\d+\w*)?|bf16|c64|c128|token)\[[^\]]*\](?:\{[^}]*\})?/;

const hloParser: StreamParser<IrState> = {
  name: "hlo",
  startState,
  token(stream, state) {
    if (stream.sol()) state.expectOp = false;
    if (stream.eatSpace()) return null;
    if (stream.match(/^\/\/.*/)) return "comment";
    if (stream.match(/^metadata=\{(?:[^{}]|\{[^}]*\})*\}/)) return "comment"; // provenance: dimmed
    if (stream.match(/^(?:HloModule|ENTRY|ROOT|FileNames|FunctionNames|FileLocations|StackFrames)\b/)) return "keyword";
    if (stream.match(/^%[\w.\-]+/)) return "variableName";
    if (stream.match(HLO_TYPE)) {
      state.expectOp = true;
      return "typeName";
    }
    if (stream.match(/^\(\)/)) return "typeName";
    if (stream.match(STRING)) return "string";
    if (stream.match(/^[a-z][\w-]*(?=\()/)) {
      state.expectOp = false;
      return "variableName.function"; // the opcode
    }
    if (stream.match(/^[A-Za-z_][\w.]*(?==)/)) return "propertyName";
    if (stream.match(NUMBER)) return "number";
    if (stream.match(/^(?:true|false)\b/)) return "atom";
    if (stream.match(/^[A-Za-z_][\w.\-]*/)) return "variableName.special";
    stream.next();
    return "punctuation";
  },
};

export const jaxprLanguage = StreamLanguage.define(jaxprParser);
export const stablehloLanguage = StreamLanguage.define(stablehloParser);
export const hloLanguage = StreamLanguage.define(hloParser);

export type IrDialect = "jaxpr" | "stablehlo" | "hlo";

export const IR_LANGUAGES: Record<IrDialect, StreamLanguage<IrState>> = {
  jaxpr: jaxprLanguage,
  stablehlo: stablehloLanguage,
  hlo: hloLanguage,
};

/** The debug-info tables XLA prints before an HLO module's computations (files, functions, stack frames). */
const HLO_METADATA_HEADER = /^(FileNames|FunctionNames|FileLocations|StackFrames)\s*$/;
const HLO_METADATA_ROW = /^\d+\s/;

/**
 * The 1-based lines [first, last] of those tables in optimized HLO text, or
 * null when there are none: they come before the program and are rarely what
 * a person opens HLO to read, so the viewer folds them.
 */
export function hloMetadataLines(text: string): [number, number] | null {
  const lines = text.split("\n");
  const first = lines.findIndex((line) => HLO_METADATA_HEADER.test(line));
  if (first < 0) return null;
  let last = first;
  for (let i = first + 1; i < lines.length; i++) {
    const line = lines[i];
    if (HLO_METADATA_HEADER.test(line) || HLO_METADATA_ROW.test(line)) last = i;
    else if (line.trim() !== "") break;
  }
  return [first + 1, last + 1];
}

/**
 * `text` with its debug-info tables replaced by one comment line saying how many lines they were:
 * what a diff compares. Between JAX versions those tables differ almost everywhere (other file
 * paths, other frame ids), and would bury the program's own changes.
 */
export function foldHloMetadata(text: string): { text: string; folded: number } {
  const range = hloMetadataLines(text);
  if (!range) return { text, folded: 0 };
  const lines = text.split("\n");
  const folded = range[1] - range[0] + 1;
  lines.splice(range[0] - 1, folded, `// ${folded} lines of XLA's file and stack-frame tables (folded)`);
  return { text: lines.join("\n"), folded };
}
