import type { Db } from "../db.js";

/**
 * Model pulls as durable jobs (the `pulls` table of `<state>/hal0.db`): one
 * row per model id, so a restart finds every pull that was under way and
 * resumes it where the bytes on disk end. The worker (worker.ts) moves the
 * states; this file only reads and writes rows.
 */
export const PULL_STATES = ["queued", "downloading", "verifying", "done", "failed", "cancelled"] as const;
export type PullState = (typeof PULL_STATES)[number];
/** Why a pull failed: the `reason` of `model.pull_failed`. */
export type PullFailure = "checksum" | "no_space" | "store" | "register" | "not_found" | "denied" | "network" | "oversized" | "unsupported_format" | "file_exists" | "model_changed";

/** A file that comes down with the model: wired as its `draft` or `mmproj`, or another `part` of a split model (`-00002-of-00003.gguf`: llama.cpp reads it from beside the first). */
export interface PullExtra {
  readonly role: "draft" | "mmproj" | "part";
  readonly hf_repo: string;
  readonly hf_filename: string;
  readonly dest: string;
  sha256?: string | null;
  size?: number | null;
  bytes?: number;
}

export interface PullJob {
  readonly model_id: string;
  /** `pull`: a new model, registered when done; `update`: a registered model's file, replaced in place, its facts edited. */
  readonly mode: "pull" | "update";
  readonly hf_repo: string;
  readonly hf_filename: string;
  readonly revision: string;
  readonly commit_sha: string | null;
  readonly sha256: string | null;
  readonly size: number | null;
  readonly bytes: number;
  readonly state: PullState;
  readonly reason: PullFailure | null;
  readonly error: string | null;
  readonly dest: string;
  readonly extras: readonly PullExtra[];
  readonly requested_by: string;
  readonly approved_by: string | null;
  readonly created_at: string;
  readonly updated_at: string;
  readonly finished_at: string | null;
}

type Row = Omit<PullJob, "extras"> & { extras: string };

export class PullStore {
  constructor(private readonly db: Db, private readonly now: () => number = Date.now) {}

  get(id: string): PullJob | undefined {
    const row = this.db.prepare("SELECT * FROM pulls WHERE model_id = ?").get(id) as Row | undefined;
    return row && parse(row);
  }

  /** The pulls under way: queued, downloading or verifying (`isLive`). */
  live(): PullJob[] {
    return this.list().filter(isLive);
  }

  list(state?: PullState): PullJob[] {
    const rows = (state === undefined
      ? this.db.prepare("SELECT * FROM pulls ORDER BY created_at, model_id").all()
      : this.db.prepare("SELECT * FROM pulls WHERE state = ? ORDER BY created_at, model_id").all(state)) as Row[];
    return rows.map(parse);
  }

  /** A new queued job; the caller has checked that no live job holds the id. Replaces an ended one. */
  create(job: Pick<PullJob, "model_id" | "mode" | "hf_repo" | "hf_filename" | "revision" | "dest" | "extras" | "requested_by" | "approved_by"> & { sha256?: string | null }): PullJob {
    const at = this.iso();
    this.db.prepare(`INSERT OR REPLACE INTO pulls (model_id, mode, hf_repo, hf_filename, revision, dest, extras, requested_by, approved_by, state, bytes, sha256, created_at, updated_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?)`).run(job.model_id, job.mode, job.hf_repo, job.hf_filename, job.revision, job.dest, JSON.stringify(job.extras), job.requested_by, job.approved_by, job.sha256 ?? null, at, at);
    return this.get(job.model_id)!;
  }

  /** The job as written; undefined when its row is gone (forgotten by another process meanwhile: the serve's model_pull_delete of a pull a command runs). */
  update(id: string, patch: Partial<Omit<PullJob, "model_id" | "created_at" | "updated_at">>): PullJob | undefined {
    const fields = Object.entries(patch).filter(([, v]) => v !== undefined);
    const set = [...fields.map(([k]) => `${k} = ?`), "updated_at = ?"].join(", ");
    const values = fields.map(([k, v]) => (k === "extras" ? JSON.stringify(v) : v));
    this.db.prepare(`UPDATE pulls SET ${set} WHERE model_id = ?`).run(...values, this.iso(), id);
    return this.get(id);
  }

  delete(id: string): boolean {
    return this.db.prepare("DELETE FROM pulls WHERE model_id = ?").run(id).changes > 0;
  }

  private iso(): string {
    return new Date(this.now()).toISOString();
  }
}

/** A job is live while it may still write bytes or register. */
export function isLive(job: Pick<PullJob, "state">): boolean {
  return job.state === "queued" || job.state === "downloading" || job.state === "verifying";
}

function parse(row: Row): PullJob {
  return { ...row, extras: JSON.parse(row.extras) as PullExtra[] };
}
