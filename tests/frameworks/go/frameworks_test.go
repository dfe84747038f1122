// Real Go clients, unmodified, against a server started per test: cairn by default (binary
// from CAIRN_SERVER, default target/debug/cairn-server relative to the repo root),
// redis-server from PATH with FRAMEWORK_SERVER=redis. The client's own behaviour is the oracle.
package frameworks

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

func serverBinary(t *testing.T) string {
	if os.Getenv("FRAMEWORK_SERVER") == "redis" {
		return "redis-server"
	}
	p := os.Getenv("CAIRN_SERVER")
	if p == "" {
		p = "target/debug/cairn-server"
	}
	if filepath.IsAbs(p) {
		return p
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(wd, "..", "..", "..", p) // tests/frameworks/go -> repo root
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// startServer runs a server on a free port until the test ends and returns its address.
func startServer(t *testing.T) string {
	port := freePort(t)
	cmd := exec.Command(serverBinary(t), "--port", fmt.Sprint(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		select {
		case err := <-exited:
			t.Errorf("server exited during the test: %v", err)
			return
		default:
		}
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	waitUntil(t, "server start", func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_, _ = c.Write([]byte("PING\r\n"))
		buf := make([]byte, 16)
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG")
	})
	return addr
}

func TestGoRedisScript(t *testing.T) {
	ctx := context.Background()
	rdb := goredis.NewClient(&goredis.Options{Addr: startServer(t)})
	defer rdb.Close()

	incrBy := goredis.NewScript(`
local v = redis.call('INCRBY', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], 100)
return {v, redis.call('TTL', KEYS[1])}`)
	// Not cached yet: EVALSHA answers NOSCRIPT and Run falls back to EVAL.
	if ok, err := incrBy.Exists(ctx, rdb).Result(); err != nil || ok[0] {
		t.Fatalf("script exists before first run: %v %v", ok, err)
	}
	got, err := incrBy.Run(ctx, rdb, []string{"counter"}, 5).Int64Slice()
	if err != nil || got[0] != 5 || got[1] != 100 {
		t.Fatalf("first run: %v %v", got, err)
	}
	// EVAL cached it: the next run is an EVALSHA hit.
	if ok, err := incrBy.Exists(ctx, rdb).Result(); err != nil || !ok[0] {
		t.Fatalf("script not cached after EVAL: %v %v", ok, err)
	}
	if v, err := incrBy.EvalSha(ctx, rdb, []string{"counter"}, 2).Int64Slice(); err != nil || v[0] != 7 {
		t.Fatalf("evalsha: %v %v", v, err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := incrBy.EvalSha(ctx, rdb, []string{"counter"}, 1).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
		t.Fatalf("evalsha after flush: %v", err)
	}
	if v, err := incrBy.Run(ctx, rdb, []string{"counter"}, 3).Int64Slice(); err != nil || v[0] != 10 {
		t.Fatalf("run after flush: %v %v", v, err)
	}

	// Read-only variant: EVALSHA_RO with the same fallback; a write inside it is refused.
	get := goredis.NewScript(`return redis.call('GET', KEYS[1])`)
	if v, err := get.RunRO(ctx, rdb, []string{"counter"}).Text(); err != nil || v != "10" {
		t.Fatalf("RunRO: %q %v", v, err)
	}
	write := goredis.NewScript(`return redis.call('SET', KEYS[1], 'x')`)
	if err := write.RunRO(ctx, rdb, []string{"counter"}).Err(); err == nil ||
		!strings.Contains(err.Error(), "Write commands are not allowed from read-only scripts") {
		t.Fatalf("write in RunRO: %v", err)
	}
	// Errors come back as errors, nil as redis.Nil, in a pipeline too.
	bad := goredis.NewScript(`return redis.error_reply('MYERR custom')`)
	if err := bad.Run(ctx, rdb, nil).Err(); err == nil || err.Error() != "MYERR custom" {
		t.Fatalf("error_reply: %v", err)
	}
	pipe := rdb.Pipeline()
	a := incrBy.Run(ctx, pipe, []string{"p"}, 1)
	b := get.Run(ctx, pipe, []string{"missing"})
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, goredis.Nil) {
		t.Fatalf("pipeline: %v", err)
	}
	if v, err := a.Int64Slice(); err != nil || v[0] != 1 {
		t.Fatalf("pipelined run: %v %v", v, err)
	}
	if !errors.Is(b.Err(), goredis.Nil) {
		t.Fatalf("pipelined nil: %v", b.Err())
	}
}

func TestRueidisClientSideCaching(t *testing.T) {
	ctx := context.Background()
	addr := startServer(t)
	// Default options: RESP3 and CLIENT TRACKING (OPTIN) for DoCache.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}})
	if err != nil {
		t.Fatalf("rueidis with client-side caching: %v", err)
	}
	defer client.Close()
	other, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()

	set := func(k, v string) {
		t.Helper()
		if err := other.Do(ctx, other.B().Set().Key(k).Value(v).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	cached := func(k string) (string, bool, error) {
		r := client.DoCache(ctx, client.B().Get().Key(k).Cache(), time.Minute)
		s, err := r.ToString()
		return s, r.IsCacheHit(), err
	}
	set("k", "v1")
	if v, hit, err := cached("k"); err != nil || v != "v1" || hit {
		t.Fatalf("first read: %q hit=%v %v", v, hit, err)
	}
	if v, hit, err := cached("k"); err != nil || v != "v1" || !hit {
		t.Fatalf("second read should come from the cache: %q hit=%v %v", v, hit, err)
	}
	// Another client's write invalidates the cached entry: the next read goes to the server.
	set("k", "v2")
	waitUntil(t, "invalidation of k", func() bool {
		v, _, err := cached("k")
		return err == nil && v == "v2"
	})
	if v, hit, err := cached("k"); err != nil || v != "v2" || !hit {
		t.Fatalf("re-read value should be cached again: %q hit=%v %v", v, hit, err)
	}
	// DEL invalidates too, and a missing key is cached as nil.
	if err := other.Do(ctx, other.B().Del().Key("k").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "invalidation after DEL", func() bool {
		_, _, err := cached("k")
		return rueidis.IsRedisNil(err)
	})
	// Several keys at once (MGET split per key), one changed by the other client.
	set("a", "1")
	set("b", "2")
	multi := func() []string {
		out := []string{}
		for _, r := range client.DoMultiCache(ctx,
			rueidis.CT(client.B().Get().Key("a").Cache(), time.Minute),
			rueidis.CT(client.B().Get().Key("b").Cache(), time.Minute)) {
			s, err := r.ToString()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		return out
	}
	if got := multi(); got[0] != "1" || got[1] != "2" {
		t.Fatalf("multi: %v", got)
	}
	set("b", "3")
	waitUntil(t, "invalidation of b", func() bool {
		got := multi()
		return got[0] == "1" && got[1] == "3"
	})
	// Expiry is a write too: a key that expires is invalidated.
	if err := other.Do(ctx, other.B().Set().Key("e").Value("x").PxMilliseconds(200).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if v, _, err := cached("e"); err != nil || v != "x" {
		t.Fatalf("e: %q %v", v, err)
	}
	waitUntil(t, "invalidation by expiry", func() bool {
		_, _, err := cached("e")
		return rueidis.IsRedisNil(err)
	})
}

func TestRueidisBroadcastTracking(t *testing.T) {
	ctx := context.Background()
	addr := startServer(t)
	// Broadcasting mode: the server invalidates every key under the prefix, read or not.
	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr},
		ClientTrackingOptions: []string{"PREFIX", "b:", "BCAST"}})
	if err != nil {
		t.Fatalf("rueidis with BCAST tracking: %v", err)
	}
	defer client.Close()
	other, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.Do(ctx, other.B().Set().Key("b:1").Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	read := func() (string, bool) {
		r := client.DoCache(ctx, client.B().Get().Key("b:1").Cache(), time.Minute)
		s, err := r.ToString()
		if err != nil {
			t.Fatal(err)
		}
		return s, r.IsCacheHit()
	}
	if v, hit := read(); v != "x" || hit {
		t.Fatalf("first read: %q hit=%v", v, hit)
	}
	if v, hit := read(); v != "x" || !hit {
		t.Fatalf("second read should be cached: %q hit=%v", v, hit)
	}
	if err := other.Do(ctx, other.B().Append().Key("b:1").Value("y").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "broadcast invalidation", func() bool {
		v, _ := read()
		return v == "xy"
	})
}
