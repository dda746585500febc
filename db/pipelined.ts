// Several statements in one write with one Sync: one round trip for all of them. node-postgres
// sends one Sync per query (its `pipeline` option too), and a Sync ends the implicit transaction
// and lets the statements after a failure run; here an error skips everything up to the one Sync,
// so nothing after a failed statement runs. Built on pg's public extension point, a Submittable
// given to client.query() (as pg-cursor is): it writes Parse (only for a statement this connection
// has not prepared yet) / Bind / Describe / Execute per statement, then Sync, and demultiplexes
// the replies per statement.
import pg from 'pg';

/** One statement: a name prepares it once per connection (null: unnamed, parsed each time). */
export interface PipelineStatement {
  text: string;
  values?: unknown[];
  name?: string | null;
}

export interface PipelineOutcome {
  /** The result of each statement that completed, in order. */
  results: pg.QueryResult[];
  /** The error that stopped the pipeline (the statements from `failedAt` on did not run), or null. */
  error: (Error & { code?: string; detail?: string }) | null;
  failedAt: number;
}

// The protocol connection's surface this module uses (pg's Connection, which @types/pg types loosely).
interface Wire {
  parsedStatements: Record<string, string>;
  stream: { cork?: () => void; uncork?: () => void };
  parse(m: { text: string; name?: string; types?: unknown[] }): void;
  bind(m: { portal: string; statement: string; values: unknown[]; valueMapper?: (v: unknown) => unknown }): void;
  describe(m: { type: 'P'; name: string }): void;
  execute(m: { portal: string; rows?: number }): void;
  sync(): void;
  on(event: 'parseComplete', fn: () => void): void;
  off(event: 'parseComplete', fn: () => void): void;
}

type Row = unknown[];

const { Result, utils } = pg as unknown as {
  Result: new () => pg.Result & {
    addFields(f: unknown[]): void;
    parseRow(r: Row): object;
    addRow(r: object): void;
    addCommandComplete(m: unknown): void;
  };
  utils: { prepareValue(v: unknown): unknown };
};

class Pipeline implements pg.Submittable {
  private readonly results: InstanceType<typeof Result>[] = [];
  private index = 0;
  /** The statements whose Parse was sent, in order (unnamed ones too): each parseComplete confirms the next. */
  private readonly parsing: { name: string; text: string }[] = [];
  private wire: Wire | null = null;
  private rowError: Error | null = null;
  private readonly onParsed = () => {
    const p = this.parsing.shift();
    if (p?.name && this.wire) this.wire.parsedStatements[p.name] = p.text;
  };

  constructor(
    private readonly statements: PipelineStatement[],
    private readonly done: (o: PipelineOutcome) => void,
  ) {}

  submit(connection: pg.Connection): void {
    const wire = connection as unknown as Wire;
    this.wire = wire;
    // Values are mapped before anything is written: a value that cannot be sent fails here, with
    // nothing of the pipeline on the wire.
    const values = this.statements.map((s) => (s.values ?? []).map((v) => utils.prepareValue(v)));
    // The client records only its active query's name on parseComplete; ours are several.
    wire.on('parseComplete', this.onParsed);
    wire.stream.cork?.();
    try {
      for (const [i, s] of this.statements.entries()) {
        const name = s.name ?? '';
        if (!name || wire.parsedStatements[name] === undefined) {
          wire.parse({ text: s.text, name });
          this.parsing.push({ name, text: s.text });
        }
        wire.bind({ portal: '', statement: name, values: values[i] });
        wire.describe({ type: 'P', name: '' });
        wire.execute({ portal: '' });
        this.results.push(new Result());
      }
      wire.sync();
    } finally {
      wire.stream.uncork?.();
    }
  }

  handleRowDescription(msg: { fields: unknown[] }): void {
    this.results[this.index]?.addFields(msg.fields);
  }

  handleDataRow(msg: { fields: Row }): void {
    const result = this.results[this.index];
    if (!result || this.rowError) return;
    try {
      result.addRow(result.parseRow(msg.fields));
    } catch (e) {
      this.rowError = e as Error;
    }
  }

  handleCommandComplete(msg: unknown): void {
    this.results[this.index]?.addCommandComplete(msg);
    this.index += 1;
  }

  handleEmptyQuery(): void {
    this.index += 1;
  }

  // The client forgets its active query on an error: no ReadyForQuery reaches us after it.
  handleError(err: Error): void {
    this.finish(err, this.index);
  }

  handleReadyForQuery(): void {
    this.finish(this.rowError, this.rowError ? this.index - 1 : this.index);
  }

  handleCopyInResponse(): void {}
  handleCopyData(): void {}
  handlePortalSuspended(): void {}

  private finish(error: Error | null, failedAt: number): void {
    this.wire?.off('parseComplete', this.onParsed);
    this.done({ results: this.results.slice(0, Math.min(this.index, this.results.length)), error, failedAt });
  }
}

/**
 * Runs `statements` on `client` in one round trip: one write, one Sync. Resolves (never rejects
 * for a statement's error) with the results of the statements that completed and the error that
 * stopped the rest. The caller decides what a failure leaves to clean up: an explicit transaction
 * block a failure interrupted stays aborted until a ROLLBACK.
 */
export function pipelined(client: pg.ClientBase, statements: PipelineStatement[]): Promise<PipelineOutcome> {
  return new Promise((resolve) => {
    client.query(new Pipeline(statements, resolve));
  });
}

/** What a deferred head's statements came to. */
export interface HeadOutcome {
  /** The head's own results (without the BEGIN and COMMIT around it). */
  results: pg.QueryResult[];
  error: PipelineOutcome['error'];
}

/** The rejection of a read whose head's results the head's owner did not accept (`accepts`): its result is not given out. */
export class StaleHead extends Error {
  constructor() {
    super('the statement ran ahead of a head whose results differ from what the caller assumed');
  }
}

// A read: one SELECT or WITH statement and nothing that writes, locks rows or changes settings.
// Anything else waits for the head (a false "no" costs one round trip, never a wrong answer).
const READ_START = /^\s*(select|with)\b/i;
const NOT_A_READ =
  /;|\b(insert|update|delete|merge|into|nextval|setval|set_config|pg_advisory\w*|for\s+(no\s+key\s+)?update|for\s+(key\s+)?share)\b/i;
export const isRead = (text: string): boolean => READ_START.test(text) && !NOT_A_READ.test(text);

const BEGIN: PipelineStatement = { text: 'BEGIN', name: 'pipeline_begin' };
const COMMIT: PipelineStatement = { text: 'COMMIT', name: 'pipeline_commit' };

/**
 * Statements that must run before anything else of a connection's work (an authentication), sent
 * with the connection's next read in one round trip, in a transaction of their own committed
 * before the read ([BEGIN, ...head, COMMIT, read, Sync]): a failure of the head skips the read. A
 * statement that is no read, or one after the head was sent, waits for the head's outcome and is
 * refused (with the head's error) when the head failed. A failed head in the transaction leaves it
 * aborted: the owner sends ROLLBACK before anything else.
 */
export class DeferredHead {
  readonly outcome: Promise<HeadOutcome>;
  private settle!: (o: HeadOutcome) => void;
  /** Whether the head went (with a read or alone). */
  sent = false;
  /** Whether the head succeeded: the connection's statements then run as usual. */
  passed = false;

  constructor(
    private readonly head: PipelineStatement[],
    /** Whether the head's results let the read that travelled with it stand (else: StaleHead). */
    private readonly accepts: (results: pg.QueryResult[]) => boolean,
  ) {
    this.outcome = new Promise((r) => {
      this.settle = r;
    });
  }

  /** Sends the head alone unless it went already; its outcome. */
  flush(client: pg.ClientBase): Promise<HeadOutcome> {
    if (!this.sent) {
      this.sent = true;
      void pipelined(client, this.head).then((o) => {
        this.passed = o.error === null;
        this.settle({ results: o.results, error: o.error });
      });
    }
    return this.outcome;
  }

  /** A statement of the connection's work: with the head when it can travel, else after it. */
  async run<T>(client: pg.ClientBase, statement: PipelineStatement, send: () => Promise<T>): Promise<T> {
    if (this.sent || !isRead(statement.text)) {
      const o = await this.flush(client);
      if (o.error) throw o.error;
      return send();
    }
    this.sent = true;
    const n = this.head.length;
    const o = await pipelined(client, [BEGIN, ...this.head, COMMIT, statement]);
    const headFailed = o.error !== null && o.failedAt <= n + 1;
    const results = o.results.slice(1, n + 1);
    this.passed = !headFailed;
    this.settle({ results, error: headFailed ? o.error : null });
    if (headFailed) throw o.error;
    if (!this.accepts(results)) throw new StaleHead();
    if (o.error) throw o.error;
    return o.results[n + 2] as T;
  }
}
