// Long-lived collaborators shared by handlers and tasks, built once at start.
import type { SecretBox } from './secret-box.js';

export interface Services {
  /** Encrypts webhook signing secrets at rest. */
  secretBox: SecretBox;
  /**
   * Named fault points a test can arm to prove that a failure half-way leaves no trace
   * (for example `erase:after-first-record`). Empty in production.
   */
  faults: Set<string>;
}
