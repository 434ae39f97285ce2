import { randomBytes } from "node:crypto";
import { renamesOf, type ChangeSet } from "../compiler/changeset.js";
import { slotOfFile } from "../schema/index.js";
import type { Db } from "./db.js";
import { storageFull } from "./errors.js";

/**
 * Stable slot ids (`slt_<12 hex>`), kept in the `slot_ids` table of the state
 * folder's database. A slot gets its id the first time the server sees it; a
 * rename moves the id to the new name; a delete drops it, so a later slot of
 * the same name is a new slot. The name is the label, the id the identity.
 *
 * Invariant: the in-memory map mirrors the table (this class is the only
 * writer while the server runs), so a roster read costs no query.
 */
export class SlotIds {
  private readonly byName = new Map<string, string>();
  private changes = 0;
  /** Names given an id the table does not hold yet (the database refused it: a full disk). */
  private readonly unsaved = new Set<string>();

  constructor(private readonly db: Db, private readonly now: () => number = Date.now) {
    const rows = db.prepare("SELECT name, id FROM slot_ids").all() as Array<{ name: string; id: string }>;
    for (const row of rows) this.byName.set(row.name, row.id);
  }

  /** Moves each time an id is given, moved or dropped (a reply built from the ids is stale once it moved). */
  get version(): number {
    return this.changes;
  }

  /**
   * The id of each name, giving the new ones an id (one transaction for all of them). A database
   * that cannot take them (a full disk, SQLITE_FULL) refuses no read: the new ids are kept in
   * memory, answered as they are, and written by the first later call the database takes.
   */
  ensure(names: Iterable<string>): Map<string, string> {
    const missing = [...names].filter((n) => !this.byName.has(n));
    for (const name of missing) {
      this.byName.set(name, newId());
      this.unsaved.add(name);
    }
    if (missing.length > 0) this.changes++;
    if (this.unsaved.size > 0) this.save();
    return this.byName;
  }

  /** Writes the ids given while the database could not take them; a full disk leaves them for the next call. */
  private save(): void {
    const insert = this.db.prepare("INSERT OR IGNORE INTO slot_ids (name, id, created_at) VALUES (?, ?, ?)");
    const at = new Date(this.now()).toISOString();
    try {
      this.db.transaction(() => {
        for (const name of this.unsaved) insert.run(name, this.byName.get(name)!, at);
      })();
    } catch (err) {
      // Kept either way: an id once answered stays the slot's. Only another failure than a full disk is the caller's.
      if (storageFull(err) !== undefined) return;
      throw err;
    }
    // A name the table already held (written by another process meanwhile) keeps the id the table has.
    const read = this.db.prepare("SELECT id FROM slot_ids WHERE name = ?");
    for (const name of this.unsaved) this.byName.set(name, (read.get(name) as { id: string }).id);
    this.unsaved.clear();
  }

  idOf(name: string): string {
    return this.ensure([name]).get(name)!;
  }

  /** The name that holds `id` now, or undefined. */
  nameOf(id: string): string | undefined {
    for (const [name, held] of this.byName) if (held === id) return name;
    const row = this.db.prepare("SELECT name FROM slot_ids WHERE id = ?").get(id) as { name: string } | undefined;
    return row?.name;
  }

  /** Moves `from`'s id to `to` (an id `to` was given in between is dropped). */
  rename(from: string, to: string): void {
    const id = this.idOf(from);
    this.db.transaction(() => {
      this.db.prepare("DELETE FROM slot_ids WHERE name = ?").run(to);
      this.db.prepare("UPDATE slot_ids SET name = ? WHERE name = ?").run(to, from);
    })();
    this.byName.delete(from);
    this.byName.set(to, id);
    const moving = this.unsaved.delete(from);
    this.unsaved.delete(to);
    if (moving) this.unsaved.add(to);
    this.changes++;
  }

  remove(name: string): void {
    this.db.prepare("DELETE FROM slot_ids WHERE name = ?").run(name);
    this.byName.delete(name);
    this.unsaved.delete(name);
    this.changes++;
  }
}

const registry = new WeakMap<Db, SlotIds>();

/** The one SlotIds of a database (routes are stateless; the map lives with the db). */
export function slotIds(db: Db): SlotIds {
  let ids = registry.get(db);
  if (!ids) {
    ids = new SlotIds(db);
    registry.set(db, ids);
  }
  return ids;
}

function newId(): string {
  return `slt_${randomBytes(6).toString("hex")}`;
}

/**
 * The commit observer that keeps stable ids true to the files: a slot file
 * renamed (the ChangeSet's `rename`) moves its id, a slot file deleted drops
 * it. The same for a route's edit and a plan applied by id.
 */
export function slotIdObserver(ids: () => SlotIds): (proposal: { changes: ChangeSet; applied: { files: ReadonlyArray<{ file: string; after: string | null }> } }) => void {
  return ({ changes, applied }) => {
    const moved = new Set<string>();
    for (const { from, to } of renamesOf(changes)) {
      const a = slotOfFile(from);
      const b = slotOfFile(to);
      if (a !== undefined && b !== undefined) {
        ids().rename(a, b);
        moved.add(from);
      }
    }
    for (const f of applied.files) {
      const name = slotOfFile(f.file);
      if (name !== undefined && f.after === null && !moved.has(f.file)) ids().remove(name);
    }
  };
}

