// Preloaded into a bench's service process (node --import) when BENCH_ROUND_TRIPS_FILE is set:
// counts the queries the process sends to Postgres (each pg client.query call is one round trip:
// several statements in one simple query count once) and writes the running total to that file,
// so a bench can report round trips per unit of work, a figure the machine's load does not move.
import fs from 'node:fs';
import pg from 'pg';

const file = process.env.BENCH_ROUND_TRIPS_FILE;
if (file) {
  let count = 0;
  const query = pg.Client.prototype.query;
  pg.Client.prototype.query = function countedQuery(...args) {
    count += 1;
    return query.apply(this, args);
  };
  const write = () => fs.writeFileSync(file, String(count));
  setInterval(write, 250).unref();
  process.on('exit', write);
}
