// Long-lived collaborators shared by handlers and tasks, built once at start.
import type { Logger } from 'pino';
import type { Db } from '../../db/database.js';
import type { ModelClient } from '../llm/client.js';
import type { Signer } from '../mail/tokens.js';
import type { Transports } from '../mail/transports.js';
import type { Lookup } from '../net/address.js';
import type { Clock } from './clock.js';
import type { Config } from './config.js';
import type { SecretBox } from './secret-box.js';

export interface Services {
  /** Encrypts webhook signing secrets at rest. */
  secretBox: SecretBox;
  /**
   * Named fault points a test can arm to prove that a failure half-way leaves no trace
   * (for example `erase:after-first-record`). Empty in production.
   */
  faults: Set<string>;
  /** The one model client (drafts, research summaries, reply intent); provider `fallback` when no model is configured. */
  model: ModelClient;
  /** Signs the links a message carries (unsubscribe, tracking). */
  signer: Signer;
  /** Where the dispatcher hands messages (SMTP or the capture transport). */
  mail: Transports;
  /** The keyed hash of a lead capture's source address (the address itself is never stored). */
  ipHash: (ip: string) => string;
  /**
   * The DNS lookup research connects through (the SSRF guard checks every address it returns);
   * unset, the system resolver. Tests inject one to point names at chosen addresses.
   */
  lookup?: Lookup;
  /**
   * The clock of business dates (today, the usage period, overdue days, expiry; see
   * src/platform/clock.ts): the system clock, a settable one in tests.
   */
  clock: Clock;
}

/** What a piece of domain code needs from the running service: the database, configuration, services and log. */
export interface Deps {
  /** A connection of a role row-level security binds to one organization at a time (withOrg). */
  db: Db;
  config: Config;
  services: Services;
  log: Logger;
}

/**
 * Deps of work that crosses organizations or runs before one is known (the sweeps, the lookups of
 * the lead capture endpoint and the inbound listener): `systemDb` is outbound_system's connection,
 * the only one on which withSystem sees every organization. Work for one organization still runs
 * with withOrg on `db`.
 */
export interface SystemDeps extends Deps {
  systemDb: Db;
}
