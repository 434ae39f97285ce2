import { basename } from "node:path";
import type { HubClient, HubFile } from "../../reconciler/host/hf-hub.js";

/**
 * What `model_inspect {hf_repo | hf_url}` says of a Hub repository, from its
 * file listing alone (one metadata call, no download): its GGUF files with
 * size and quantisation (from the name), split files grouped
 * (`-00001-of-00003`), and which files are drafters or vision projectors.
 */

/** llama.cpp's quant names as they appear in GGUF file names (longest first, so Q4_K_M wins over Q4_K). */
const QUANTS = [
  "IQ1_S", "IQ1_M", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ2_M", "IQ3_XXS", "IQ3_XS", "IQ3_S", "IQ3_M", "IQ4_XS", "IQ4_NL",
  "Q2_K_S", "Q2_K_L", "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q3_K_XL", "Q3_K", "Q4_K_S", "Q4_K_M", "Q4_K_L", "Q4_K_XL", "Q4_K", "Q4_0_4_4", "Q4_0_4_8", "Q4_0_8_8",
  "Q4_0", "Q4_1", "Q5_K_S", "Q5_K_M", "Q5_K_L", "Q5_K_XL", "Q5_K", "Q5_0", "Q5_1", "Q6_K_L", "Q6_K_XL", "Q6_K", "Q8_K_XL", "Q8_0", "MXFP4", "TQ1_0", "TQ2_0", "BF16", "F16", "F32",
].sort((a, b) => b.length - a.length);
const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/i;

export interface HubGguf {
  readonly file: string;
  readonly size: number;
  readonly sha256: string | null;
  readonly quant: string | null;
  readonly role: "model" | "draft" | "mmproj";
}

export interface HubSplitGroup {
  /** The first part's name: what a runner is given (llama.cpp finds the rest beside it). */
  readonly file: string;
  readonly parts: readonly string[];
  readonly size: number;
  readonly quant: string | null;
  readonly complete: boolean;
}

export interface HubInspection {
  readonly hf_repo: string;
  readonly revision: string;
  readonly commit: string;
  readonly endpoint: string;
  readonly files: readonly HubGguf[];
  readonly splits: readonly HubSplitGroup[];
  readonly drafts: readonly HubGguf[];
  readonly projectors: readonly HubGguf[];
}

/** The quantisation a GGUF file name spells (`Qwen3-4B-Q4_K_M.gguf` → Q4_K_M), null when none. */
export function quantOfName(file: string): string | null {
  const stem = basename(file).replace(SPLIT, "").replace(/\.gguf$/i, "").toUpperCase();
  for (const q of QUANTS) {
    const at = stem.lastIndexOf(q);
    if (at >= 0 && (at === 0 || /[-_.]/.test(stem[at - 1]!)) && (at + q.length === stem.length || /[-_.]/.test(stem[at + q.length]!))) return q;
  }
  return null;
}

function roleOf(file: string): HubGguf["role"] {
  const name = basename(file).toLowerCase();
  if (name.includes("mmproj") || name.includes("projector")) return "mmproj";
  if (/(^|[-_.])(draft|drafter|dflash|eagle3?)([-_.]|$)/.test(name)) return "draft";
  return "model";
}

export async function inspectHubRepo(hub: HubClient, repo: string, revision = "main"): Promise<HubInspection> {
  const info = await hub.repoInfo(repo, revision);
  const ggufs: HubGguf[] = info.files.filter((f: HubFile) => f.path.toLowerCase().endsWith(".gguf"))
    .map((f) => ({ file: f.path, size: f.size, sha256: f.sha256, quant: quantOfName(f.path), role: roleOf(f.path) }))
    .sort((a, b) => (a.file < b.file ? -1 : 1));
  const groups = new Map<string, HubGguf[]>();
  for (const g of ggufs) {
    const m = SPLIT.exec(g.file);
    if (m) groups.set(g.file.replace(SPLIT, ""), [...(groups.get(g.file.replace(SPLIT, "")) ?? []), g]);
  }
  const splits = [...groups.values()].map((parts): HubSplitGroup => {
    const total = Number(SPLIT.exec(parts[0]!.file)![2]);
    return { file: parts[0]!.file, parts: parts.map((p) => p.file), size: parts.reduce((n, p) => n + p.size, 0), quant: parts[0]!.quant, complete: parts.length === total };
  });
  return {
    hf_repo: info.id, revision, commit: info.sha, endpoint: hub.endpoint, files: ggufs, splits,
    drafts: ggufs.filter((g) => g.role === "draft"), projectors: ggufs.filter((g) => g.role === "mmproj"),
  };
}
