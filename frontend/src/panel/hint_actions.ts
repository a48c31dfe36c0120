/**
 * Buttons under an error's hint, from features that know what could fix it
 * (runtimes.ts: "Run on JAX 0.4.38"). The Output panel asks every provider when
 * it draws an error; a provider returns an element or null.
 */

import type { ErrorEvent } from "../wire/protocol";

export type HintAction = (ev: ErrorEvent) => HTMLElement | null;

export const HINT_ACTIONS: HintAction[] = [];

export function hintActions(ev: ErrorEvent): HTMLElement[] {
  return HINT_ACTIONS.map((provider) => provider(ev)).filter((e): e is HTMLElement => e !== null);
}
