import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import type { Database } from '@actor/kit';
import { adapters, apiTokens, projects, rateCards, secrets, type schema } from './schema.js';

export type AdapterRow = typeof adapters.$inferSelect;
export type AdapterInsert = typeof adapters.$inferInsert;
export type RateCardRow = typeof rateCards.$inferSelect;
export type RateCardInsert = Omit<typeof rateCards.$inferInsert, 'revision' | 'createdAt'>;

/** The columns of a secret that may leave the registry: never the ciphertext. */
const secretSummaryColumns = {
  name: secrets.name,
  version: secrets.version,
  createdAt: secrets.createdAt,
  updatedAt: secrets.updatedAt,
};

export interface SecretSummaryRow {
  name: string;
  version: number;
  createdAt: Date;
  updatedAt: Date;
}

/** Every SQL statement of the registry. */
export class RegistryRepository {
  constructor(private readonly db: Database<typeof schema>) {}

  async listAdapters(): Promise<AdapterRow[]> {
    return this.db.select().from(adapters).orderBy(adapters.type);
  }

  async getAdapter(type: string): Promise<AdapterRow | undefined> {
    const [row] = await this.db.select().from(adapters).where(eq(adapters.type, type));
    return row;
  }

  async putAdapter(row: AdapterInsert): Promise<AdapterRow> {
    const { type, ...rest } = row;
    const [stored] = await this.db
      .insert(adapters)
      .values({ ...row, updatedAt: new Date() })
      .onConflictDoUpdate({ target: adapters.type, set: { ...rest, updatedAt: new Date() } })
      .returning();
    void type;
    return stored!;
  }

  async currentRateCards(): Promise<Map<string, RateCardRow>> {
    const rows = await this.db
      .selectDistinctOn([rateCards.adapterType])
      .from(rateCards)
      .orderBy(rateCards.adapterType, desc(rateCards.revision));
    return new Map(rows.map((row) => [row.adapterType, row]));
  }

  async rateCardRevisions(adapterType: string, revision?: number): Promise<RateCardRow[]> {
    return this.db
      .select()
      .from(rateCards)
      .where(
        revision
          ? and(eq(rateCards.adapterType, adapterType), eq(rateCards.revision, revision))
          : eq(rateCards.adapterType, adapterType),
      )
      .orderBy(desc(rateCards.revision));
  }

  /**
   * Appends a revision numbered one past the newest. Identical prices return the current revision
   * (so a restarting bootstrap does not mint a revision per boot). The primary key on
   * (adapter_type, revision) makes two concurrent writers collide instead of sharing a number.
   */
  async appendRateCard(card: RateCardInsert): Promise<{ row: RateCardRow; created: boolean }> {
    return this.db.transaction(async (tx) => {
      const [current] = await tx
        .select()
        .from(rateCards)
        .where(eq(rateCards.adapterType, card.adapterType))
        .orderBy(desc(rateCards.revision))
        .limit(1);
      if (
        current &&
        current.inputMicroUsdPerMtok === card.inputMicroUsdPerMtok &&
        current.outputMicroUsdPerMtok === card.outputMicroUsdPerMtok &&
        current.microUsdPerSecond === card.microUsdPerSecond &&
        current.microUsdPerTask === card.microUsdPerTask &&
        current.source === card.source
      ) {
        return { row: current, created: false };
      }
      const [row] = await tx
        .insert(rateCards)
        .values({ ...card, revision: (current?.revision ?? 0) + 1 })
        .returning();
      return { row: row!, created: true };
    });
  }

  async ensureProject(id: string, name: string): Promise<void> {
    await this.db.insert(projects).values({ id, name }).onConflictDoNothing();
  }

  /**
   * Creates a token, or for an existing one (same hash: the same token) re-enables it and adds the
   * scopes it lacks, keeping any it already has. A restart with an old data dir thus gives the
   * development token scopes introduced since (`secrets:admin`) without touching any other token.
   */
  async ensureToken(id: string, projectId: string, tokenHash: string, scopes: string[]): Promise<void> {
    await this.db
      .insert(apiTokens)
      .values({ id, projectId, tokenHash, scopes })
      .onConflictDoUpdate({
        target: apiTokens.tokenHash,
        set: {
          scopes: sql`${apiTokens.scopes} || coalesce((select jsonb_agg(wanted) from jsonb_array_elements(excluded.scopes) as wanted where not ${apiTokens.scopes} @> jsonb_build_array(wanted)), '[]'::jsonb)`,
          revokedAt: null,
        },
      });
  }

  async findToken(tokenHash: string) {
    const [row] = await this.db
      .select()
      .from(apiTokens)
      .where(and(eq(apiTokens.tokenHash, tokenHash), isNull(apiTokens.revokedAt)));
    return row;
  }

  async projectExists(projectId: string): Promise<boolean> {
    const [row] = await this.db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId));
    return row !== undefined;
  }

  /** Creates the secret at version 1 or replaces its value in place (version + 1, created_at kept). */
  async putSecret(projectId: string, name: string, ciphertext: string): Promise<SecretSummaryRow> {
    const now = new Date();
    const [row] = await this.db
      .insert(secrets)
      .values({ projectId, name, ciphertext, version: 1, createdAt: now, updatedAt: now })
      .onConflictDoUpdate({
        target: [secrets.projectId, secrets.name],
        set: { ciphertext, version: sql`${secrets.version} + 1`, updatedAt: now },
      })
      .returning(secretSummaryColumns);
    return row!;
  }

  /** Every secret of a project without its ciphertext, ordered by name. */
  async listSecrets(projectId: string): Promise<SecretSummaryRow[]> {
    return this.db.select(secretSummaryColumns).from(secrets).where(eq(secrets.projectId, projectId)).orderBy(secrets.name);
  }

  /** Removes a secret; false when there was none of that name. */
  async deleteSecret(projectId: string, name: string): Promise<boolean> {
    const rows = await this.db
      .delete(secrets)
      .where(and(eq(secrets.projectId, projectId), eq(secrets.name, name)))
      .returning({ name: secrets.name });
    return rows.length > 0;
  }

  async getSecret(projectId: string, name: string) {
    const [row] = await this.db
      .select()
      .from(secrets)
      .where(and(eq(secrets.projectId, projectId), eq(secrets.name, name)));
    return row;
  }
}
