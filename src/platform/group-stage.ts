// Group commit's queue: work that arrives while the previous group is in flight forms the next
// group, run as one (one transaction, one statement), each item settling with its own result.
// Under light load a group is one item and nothing waits longer than a turn of the event loop.

/** Items per group at most: a transaction of a few hundred statements still commits within milliseconds. */
export const MAX_GROUP = 64;

type Settled<O> = PromiseSettledResult<O>;

/**
 * A stage that runs `run` over whatever is queued whenever fewer than `concurrency` runs are in
 * flight, at most `max` items at a time; items submitted while the runs are in flight form the
 * next group. Each item's promise settles with its own result.
 */
export function groupStage<I, O>(run: (items: I[]) => Promise<Settled<O>[]>, opts: { max?: number; concurrency?: number } = {}) {
  const max = opts.max ?? MAX_GROUP;
  const concurrency = opts.concurrency ?? 1;
  const queue: { item: I; resolve: (o: O) => void; reject: (e: unknown) => void }[] = [];
  let running = 0;
  let scheduled = false;
  const next = () => {
    scheduled = false;
    if (running >= concurrency || queue.length === 0) return;
    running += 1;
    const group = queue.splice(0, max);
    run(group.map((g) => g.item))
      .then(
        (results) => {
          results.forEach((r, i) => {
            if (r.status === 'fulfilled') group[i].resolve(r.value);
            else group[i].reject(r.reason);
          });
        },
        (e) => {
          for (const g of group) g.reject(e);
        },
      )
      .finally(() => {
        running -= 1;
        next();
      });
  };
  return {
    submit(item: I): Promise<O> {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        // The next turn of the event loop: what arrived with it (the same poll) joins the group.
        if (running < concurrency && !scheduled) {
          scheduled = true;
          setImmediate(next);
        }
      });
    },
  };
}
