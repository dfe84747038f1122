// Real Node frameworks, unmodified, against a server started per test: cairn by default
// (binary from CAIRN_SERVER, default target/debug/cairn-server), redis-server from PATH with
// FRAMEWORK_SERVER=redis. The framework's own behaviour is the oracle.
//
// A test whose framework needs a command the server does not have yet (probed at load time:
// the command sent with no arguments answers "unknown command") still runs, as a TODO whose
// reason reads "needs <command>": its failure is reported, not counted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import Redis from 'ioredis';
import Redlock from 'redlock';
import { Queue, Worker, QueueEvents } from 'bullmq';

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

function serverBinary() {
  if (process.env.FRAMEWORK_SERVER === 'redis') return 'redis-server';
  const p = process.env.CAIRN_SERVER || 'target/debug/cairn-server';
  return path.isAbsolute(p) ? p : path.join(repoRoot, p);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function waitUntil(cond, what, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

// One PING on a plain socket: true once the server answers +PONG.
function rawPing(port) {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let buf = '';
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d;
      if (buf.includes('\r\n')) { sock.destroy(); resolve(buf.startsWith('+PONG')); }
    });
    sock.on('error', () => resolve(false));
  });
}

async function startServer() {
  const port = await freePort();
  const dir = mkdtempSync(path.join(tmpdir(), 'fw-node-'));
  const proc = spawn(serverBinary(), ['--port', String(port), '--bind', '127.0.0.1',
    '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  let exited = false;
  proc.on('exit', () => { exited = true; });
  const clients = [];
  const srv = {
    port,
    client(opts = {}) {
      const c = new Redis({ host: '127.0.0.1', port, lazyConnect: false, ...opts });
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      const wasRunning = !exited;
      proc.kill('SIGTERM');
      await waitUntil(() => exited, 'server exit', 10000).catch(() => proc.kill('SIGKILL'));
      assert.ok(wasRunning, 'server exited during the test');
    },
  };
  await waitUntil(async () => {
    if (exited) throw new Error(`server did not start: ${serverBinary()}`);
    return rawPing(port);
  }, 'server start', 20000);
  return srv;
}

// Which of `commands` the server does not know.
async function missing(commands) {
  const srv = await startServer();
  const c = srv.client();
  const out = [];
  for (const cmd of commands) {
    try { await c.call(cmd); } catch (e) {
      if (/unknown command/.test(e.message)) out.push(cmd);
    }
  }
  await srv.stop();
  return out;
}

function needs(list) {
  return list.length ? { todo: `needs ${list.join(' ')}` } : {};
}

const bullNeeds = needs(await missing(['XADD', 'XTRIM', 'XREAD']));

// Runs fn with a fresh server and stops it afterwards.
async function withServer(fn) {
  const srv = await startServer();
  try { await fn(srv); } finally { await srv.stop(); }
}

test('ioredis defineCommand: EVALSHA, NOSCRIPT fallback to EVAL, pipelines, script errors', () =>
  withServer(async (srv) => {
    const r = srv.client();
    r.defineCommand('swapget', {
      numberOfKeys: 2,
      lua: `local a = redis.call('GET', KEYS[1])
            local b = redis.call('GET', KEYS[2])
            redis.call('SET', KEYS[1], b)
            redis.call('SET', KEYS[2], a)
            return {a, b, ARGV[1]}`,
    });
    r.defineCommand('fail', { numberOfKeys: 0, lua: "return redis.error_reply('MY custom')" });
    r.defineCommand('bump', { numberOfKeys: 1, lua: "return redis.call('INCRBY', KEYS[1], ARGV[1])" });
    await r.mset('a', '1', 'b', '2');
    assert.deepEqual(await r.swapget('a', 'b', 'x'), ['1', '2', 'x']);
    assert.deepEqual(await r.mget('a', 'b'), ['2', '1']);
    // The script cache is emptied: ioredis gets NOSCRIPT from EVALSHA and falls back to EVAL.
    assert.equal(await r.script('FLUSH'), 'OK');
    assert.deepEqual(await r.swapget('a', 'b', 'y'), ['2', '1', 'y']);
    const p = await r.pipeline().bump('n', 5).bump('n', 7).get('n').exec();
    assert.deepEqual(p, [[null, 5], [null, 12], [null, '12']]);
    const m = await r.multi().bump('n', 1).bump('n', 1).exec();
    assert.deepEqual(m, [[null, 13], [null, 14]]);
    await assert.rejects(r.fail(), /MY custom/);
    await assert.rejects(r.bump('a', 'notanumber'), /not an integer/);
  }));

test('node-redlock: a lock excludes, extends and releases', () =>
  withServer(async (srv) => {
    const counterKey = 'rl:counter';
    const base = srv.client();
    await base.set(counterKey, '0');
    // Two contenders each do non-atomic GET/SET increments under the lock.
    const rounds = 25;
    const contender = async () => {
      const c = srv.client();
      const redlock = new Redlock([c], { retryCount: 500, retryDelay: 10, retryJitter: 5 });
      for (let i = 0; i < rounds; i++) {
        const lock = await redlock.acquire(['rl:res'], 5000);
        const v = Number(await c.get(counterKey));
        await sleep(1);
        await c.set(counterKey, String(v + 1));
        await lock.release();
      }
    };
    await Promise.all([contender(), contender()]);
    assert.equal(await base.get(counterKey), String(2 * rounds));

    const a = new Redlock([srv.client()], { retryCount: 0 });
    const b = new Redlock([srv.client()], { retryCount: 0 });
    let lock = await a.acquire(['rl:one'], 2000);
    await assert.rejects(b.acquire(['rl:one'], 2000));
    lock = await lock.extend(10000);
    const pttl = await base.pttl('rl:one');
    assert.ok(pttl > 2000 && pttl <= 10000, `pttl ${pttl}`);
    await lock.release();
    assert.equal(await base.exists('rl:one'), 0);
    const lock2 = await b.acquire(['rl:one'], 2000);
    await lock2.release();
    // using(): the routine runs under the lock, which is gone afterwards.
    const seen = await a.using(['rl:two'], 2000, async () => base.exists('rl:two'));
    assert.equal(seen, 1);
    assert.equal(await base.exists('rl:two'), 0);
  }));

test('BullMQ: a queue, a worker, a delayed job, a failed-and-retried job', bullNeeds, () =>
  withServer(async (srv) => {
    const connection = { host: '127.0.0.1', port: srv.port, maxRetriesPerRequest: null };
    const queue = new Queue('fw', { connection });
    const events = new QueueEvents('fw', { connection });
    const runs = new Map();
    const worker = new Worker('fw', async (job) => {
      runs.set(job.id, (runs.get(job.id) || 0) + 1);
      if (job.name === 'flaky' && job.attemptsMade < 2) throw new Error(`try ${job.attemptsMade}`);
      if (job.name === 'broken') throw new Error('always broken');
      return job.data.a + job.data.b;
    }, { connection, concurrency: 1 });
    try {
      await events.waitUntilReady();
      await worker.waitUntilReady();
      const plain = await queue.add('sum', { a: 1, b: 2 });
      assert.equal(await plain.waitUntilFinished(events, 30000), 3);

      const t0 = Date.now();
      const delayed = await queue.add('sum', { a: 10, b: 20 }, { delay: 700 });
      assert.equal(await delayed.getState(), 'delayed');
      assert.equal(await delayed.waitUntilFinished(events, 30000), 30);
      const done = await queue.getJob(delayed.id);
      assert.ok(done.processedOn - t0 >= 700, 'delayed job ran before its delay');

      const flaky = await queue.add('flaky', { a: 2, b: 2 }, { attempts: 3, backoff: { type: 'fixed', delay: 100 } });
      assert.equal(await flaky.waitUntilFinished(events, 30000), 4);
      assert.equal(runs.get(flaky.id), 3);
      assert.equal((await queue.getJob(flaky.id)).attemptsMade, 3);

      const broken = await queue.add('broken', { a: 0, b: 0 }, { attempts: 2 });
      await assert.rejects(broken.waitUntilFinished(events, 30000), /always broken/);
      assert.equal(await broken.getState(), 'failed');
      assert.equal(runs.get(broken.id), 2);
      const counts = await queue.getJobCounts('completed', 'failed', 'waiting', 'delayed');
      assert.deepEqual(counts, { completed: 3, failed: 1, waiting: 0, delayed: 0 });
      // Each job ran exactly the number of times its attempts say.
      assert.equal(runs.get(plain.id), 1);
      assert.equal(runs.get(delayed.id), 1);
    } finally {
      await worker.close();
      await events.close();
      await queue.close();
    }
  }));
