package cache

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// nativeAndLua are two servers for one differential check: the embedded
// server as Open starts it (putScript answered in Go) and a plain miniredis
// (putScript run by its Lua interpreter).
type nativeAndLua struct {
	native, lua       *redis.Client
	emb               *embedded
	nativeSrv, luaSrv *miniredis.Miniredis
}

func startNativeAndLua(t *testing.T) *nativeAndLua {
	t.Helper()
	// No clock: a tick between a write and its check would age one
	// server's TTLs and not the other's.
	emb, err := startEmbeddedServer()
	if err != nil {
		t.Fatal(err)
	}
	luaSrv := miniredis.NewMiniRedis()
	if err := luaSrv.StartAddr("127.0.0.1:0"); err != nil {
		emb.close()
		t.Fatal(err)
	}
	p := &nativeAndLua{
		native: redis.NewClient(&redis.Options{Addr: emb.addr(), MaxRetries: -1}),
		lua:    redis.NewClient(&redis.Options{Addr: luaSrv.Addr(), MaxRetries: -1}),
		emb:    emb, nativeSrv: emb.srv, luaSrv: luaSrv,
	}
	t.Cleanup(func() {
		_ = p.native.Close()
		_ = p.lua.Close()
		emb.close()
		luaSrv.Close()
	})
	return p
}

// state is what a key holds, as a reader of either server sees it.
type state struct {
	typ    string
	fields map[string]string
	ttl    time.Duration
	str    string
}

func readState(t *testing.T, srv *miniredis.Miniredis, c *redis.Client, k string) state {
	t.Helper()
	ctx := context.Background()
	st := state{typ: c.Type(ctx, k).Val(), ttl: srv.TTL(k)}
	switch st.typ {
	case "hash":
		st.fields = c.HGetAll(ctx, k).Val()
	case "string":
		st.str = c.Get(ctx, k).Val()
	}
	return st
}

func (a state) equal(b state) bool {
	return a.typ == b.typ && a.ttl == b.ttl && a.str == b.str && maps.Equal(a.fields, b.fields)
}

// Every starting value of a key (absent, ours older, newer or equal, corrupt
// in each way Get knows, another type, extra fields) and every put gives the
// same reply and leaves the same value and TTL natively as in Lua.
func TestNativePutMatchesLua(t *testing.T) {
	p := startNativeAndLua(t)
	ctx := context.Background()
	if err := putScript.Load(ctx, p.native).Err(); err != nil {
		t.Fatal(err)
	}
	const at = int64(1_750_000_000_000_000) // µs
	limit := at + 5_000_000
	seeds := []struct {
		name string
		seed func(c *redis.Client, k string) error
	}{
		{"absent", func(*redis.Client, string) error { return nil }},
		{"older", hashSeed("1", fmt.Sprint(at-1), `{"old":1}`)},
		{"equal", hashSeed("1", fmt.Sprint(at), `{"same":1}`)},
		{"newer", hashSeed("1", fmt.Sprint(at+1), `{"new":1}`)},
		{"newer at the limit", hashSeed("1", fmt.Sprint(limit), `{"new":1}`)},
		{"beyond the limit", hashSeed("1", fmt.Sprint(limit+1), `{"future":1}`)},
		{"newer version, newer", hashSeed("2", fmt.Sprint(at+1), `{"v2":1}`)},
		{"as_of not a number", hashSeed("1", "yesterday", `{}`)},
		{"as_of empty", hashSeed("1", "", `{}`)},
		{"as_of padded", hashSeed("1", fmt.Sprintf(" %d\n", at+1), `{}`)},
		{"as_of a float", hashSeed("1", fmt.Sprintf("%d.5", at), `{}`)},
		{"as_of exponent", hashSeed("1", "1e300", `{}`)},
		{"as_of hex", hashSeed("1", "0x7fffffffffffffff", `{}`)},
		{"as_of negative", hashSeed("1", "-5", `{}`)},
		{"as_of missing", func(c *redis.Client, k string) error {
			return c.HSet(ctx, k, "v", "1", "val", `{}`).Err()
		}},
		{"extra fields, older", func(c *redis.Client, k string) error {
			return c.HSet(ctx, k, "v", "1", "as_of", at-1, "val", `{}`, "x", "1", "y", "2").Err()
		}},
		{"extra fields, newer", func(c *redis.Client, k string) error {
			return c.HSet(ctx, k, "v", "1", "as_of", at+1, "val", `{}`, "x", "1").Err()
		}},
		{"older with a TTL", func(c *redis.Client, k string) error {
			if err := hashSeed("1", fmt.Sprint(at-1), `{}`)(c, k); err != nil {
				return err
			}
			return c.PExpire(ctx, k, time.Hour).Err()
		}},
		{"a string", func(c *redis.Client, k string) error { return c.Set(ctx, k, "garbage", time.Hour).Err() }},
		{"a list", func(c *redis.Client, k string) error { return c.RPush(ctx, k, "a", "b").Err() }},
	}
	puts := []struct {
		name string
		args []any // ARGV[1..5]
	}{
		{"newer", []any{"1", at, `{"put":1}`, 60_000, limit}},
		{"older", []any{"1", at - 10, `{"put":2}`, 1, limit}},
	}
	for _, sd := range seeds {
		for _, pt := range puts {
			t.Run(sd.name+"/"+pt.name, func(t *testing.T) {
				k := "k:" + sd.name + ":" + pt.name
				for _, c := range []*redis.Client{p.native, p.lua} {
					if err := sd.seed(c, k); err != nil {
						t.Fatalf("seed: %v", err)
					}
				}
				before := p.emb.put.answered.Load()
				gotN, errN := putScript.EvalSha(ctx, p.native, []string{k}, pt.args...).Int()
				gotL, errL := putScript.Run(ctx, p.lua, []string{k}, pt.args...).Int()
				if errN != nil || errL != nil {
					t.Fatalf("native %v, lua %v", errN, errL)
				}
				if p.emb.put.answered.Load() != before+1 {
					t.Fatal("the embedded server ran the script in Lua, not natively")
				}
				if gotN != gotL {
					t.Errorf("reply: native %d, lua %d", gotN, gotL)
				}
				sn, sl := readState(t, p.nativeSrv, p.native, k), readState(t, p.luaSrv, p.lua, k)
				if !sn.equal(sl) {
					t.Errorf("state:\nnative %+v\nlua    %+v", sn, sl)
				}
			})
		}
	}
}

func hashSeed(v, asOf, val string) func(c *redis.Client, k string) error {
	return func(c *redis.Client, k string) error {
		return c.HSet(context.Background(), k, "v", v, "as_of", asOf, "val", val).Err()
	}
}

// Calls the writer never makes are left to the Lua, whose answer (or error)
// is then the script's own.
func TestNativePutLeavesOddCallsToLua(t *testing.T) {
	p := startNativeAndLua(t)
	ctx := context.Background()
	if err := putScript.Load(ctx, p.native).Err(); err != nil {
		t.Fatal(err)
	}
	const at = int64(1_750_000_000_000_000)
	for _, tc := range []struct {
		name string
		keys []string
		args []any
	}{
		{"as_of not a number", []string{"a"}, []any{"1", "soon", "{}", 1000, at}},
		{"ttl zero", []string{"c"}, []any{"1", at, "{}", 0, at}},
		{"ttl not a number", []string{"d"}, []any{"1", at, "{}", "soon", at}},
		{"two keys", []string{"e", "f"}, []any{"1", at, "{}", 1000, at}},
		{"arguments missing", []string{"g"}, []any{"1", at, "{}", 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := p.emb.put.answered.Load()
			gotN, errN := putScript.EvalSha(ctx, p.native, tc.keys, tc.args...).Result()
			gotL, errL := putScript.Run(ctx, p.lua, tc.keys, tc.args...).Result()
			if p.emb.put.answered.Load() != before {
				t.Error("answered natively")
			}
			if fmt.Sprint(gotN, errN) != fmt.Sprint(gotL, errL) {
				t.Errorf("native %v %v, lua %v %v", gotN, errN, gotL, errL)
			}
			for _, k := range tc.keys {
				if sn, sl := readState(t, p.nativeSrv, p.native, k), readState(t, p.luaSrv, p.lua, k); !sn.equal(sl) {
					t.Errorf("state of %s:\nnative %+v\nlua    %+v", k, sn, sl)
				}
			}
		})
	}
}

// EVALSHA is answered natively only while Redis would know the script:
// NOSCRIPT before it is loaded and after SCRIPT FLUSH, as the writer's
// fallback to EVAL expects.
func TestNativePutKeepsTheScriptCache(t *testing.T) {
	p := startNativeAndLua(t)
	ctx := context.Background()
	args := []any{"1", int64(1_750_000_000_000_000), "{}", 60_000, int64(1_750_000_000_000_000)}
	noScript := func(step string) {
		t.Helper()
		err := putScript.EvalSha(ctx, p.native, []string{"k"}, args...).Err()
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			t.Fatalf("%s: EVALSHA err = %v, want NOSCRIPT", step, err)
		}
	}
	noScript("fresh server")
	// EVAL caches the script, as in Redis; EVALSHA then finds it.
	if n, err := putScript.Eval(ctx, p.native, []string{"k"}, args...).Int(); err != nil || n != 1 {
		t.Fatalf("EVAL = %d, %v", n, err)
	}
	if p.emb.put.answered.Load() != 1 {
		t.Fatal("EVAL not answered natively")
	}
	if exists := p.native.ScriptExists(ctx, putScript.Hash()).Val(); len(exists) != 1 || !exists[0] {
		t.Fatalf("SCRIPT EXISTS after EVAL = %v", exists)
	}
	if n, err := putScript.EvalSha(ctx, p.native, []string{"k"}, args...).Int(); err != nil || n != 0 {
		t.Fatalf("EVALSHA of an equal as_of = %d, %v, want 0", n, err)
	}
	if p.emb.put.answered.Load() != 2 {
		t.Fatal("EVALSHA after EVAL not answered natively")
	}
	if err := p.native.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	noScript("after SCRIPT FLUSH")
	if err := putScript.Load(ctx, p.native).Err(); err != nil {
		t.Fatal(err)
	}
	if err := putScript.EvalSha(ctx, p.native, []string{"k"}, args...).Err(); err != nil {
		t.Fatalf("EVALSHA after SCRIPT LOAD: %v", err)
	}
	if p.emb.put.answered.Load() != 3 {
		t.Fatal("EVALSHA after SCRIPT LOAD not answered natively")
	}
}

// A transaction queues the script like any command (the hook cannot queue
// into it), and a connection on another database is not the one the hook
// writes to: both are left to miniredis.
func TestNativePutLeavesTransactionsAndOtherDatabases(t *testing.T) {
	p := startNativeAndLua(t)
	ctx := context.Background()
	if err := putScript.Load(ctx, p.native).Err(); err != nil {
		t.Fatal(err)
	}
	args := []any{"1", int64(1_750_000_000_000_000), "{}", 60_000, int64(1_750_000_000_000_000)}
	cmds, err := p.native.TxPipelined(ctx, func(pl redis.Pipeliner) error {
		putScript.EvalSha(ctx, pl, []string{"tx"}, args...)
		return nil
	})
	if err != nil || len(cmds) != 1 {
		t.Fatalf("transaction: %v, %v", cmds, err)
	}
	if n, err := cmds[0].(*redis.Cmd).Int(); err != nil || n != 1 {
		t.Fatalf("script in a transaction = %d, %v", n, err)
	}

	db1 := redis.NewClient(&redis.Options{Addr: p.emb.addr(), DB: 1, MaxRetries: -1})
	defer db1.Close()
	if n, err := putScript.EvalSha(ctx, db1, []string{"other"}, args...).Int(); err != nil || n != 1 {
		t.Fatalf("script on db 1 = %d, %v", n, err)
	}
	if p.emb.put.answered.Load() != 0 {
		t.Fatal("answered natively")
	}
	if p.nativeSrv.DB(1).Type("other") != "hash" || p.nativeSrv.DB(0).Exists("other") {
		t.Fatal("the write on db 1 did not land in db 1 alone")
	}
}

// The store's own traffic keeps the server in fast mode, where the keys
// written natively expire from the deadline index, tick by tick.
func TestFastModeExpiresFromTheIndex(t *testing.T) {
	emb, err := startEmbeddedServer()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.close()
	n := emb.put
	t0 := n.lastTick
	s := mustOpen(t, Config{URL: "redis://" + emb.addr()})
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s.Put("order", "o-1", entry(asOf, `{"a":1}`), 10*time.Second)
	s.Put("order", "o-2", entry(asOf, `{"a":2}`), 20*time.Second)
	mustFlush(t, s)
	mustGet(t, s, "order", "o-1")
	if n.exactNow.Load() {
		t.Fatal("the store's traffic switched the server to exact mode")
	}
	k1, k2 := key(DefaultKeyPrefix, "order", "o-1"), key(DefaultKeyPrefix, "order", "o-2")

	n.tick(t0.Add(5 * time.Second))
	// Rewritten at t0+5 s with 10 s: due at t0+15 s, not t0+10 s.
	s.Put("order", "o-1", entry(asOf.Add(time.Second), `{"a":3}`), 10*time.Second)
	mustFlush(t, s)
	n.tick(t0.Add(10 * time.Second))
	if !emb.srv.Exists(k1) {
		t.Fatal("a rewritten key expired at its first deadline")
	}
	n.tick(t0.Add(15 * time.Second))
	if emb.srv.Exists(k1) || !emb.srv.Exists(k2) {
		t.Fatalf("at t0+15 s: o-1 exists %v (want false), o-2 %v (want true)", emb.srv.Exists(k1), emb.srv.Exists(k2))
	}
	if _, err := s.Get(context.Background(), "order", "o-1"); err == nil {
		t.Fatal("Get served an expired key")
	}
	n.tick(t0.Add(20 * time.Second))
	if emb.srv.Exists(k2) {
		t.Fatal("o-2 outlived its TTL")
	}
	if n.exactNow.Load() || len(n.due) != 0 {
		t.Fatalf("exact %v, %d deadlines left", n.exactNow.Load(), len(n.due))
	}
}

// Any other command switches to exact mode, where every key has the TTL it
// has left and miniredis's clock ages it, as before.
func TestExactModeKeepsTheTTLsLeft(t *testing.T) {
	emb, err := startEmbeddedServer()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.close()
	n := emb.put
	t0 := n.lastTick
	s := mustOpen(t, Config{URL: "redis://" + emb.addr()})
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s.Put("order", "o-1", entry(asOf, `{"a":1}`), 10*time.Second)
	mustFlush(t, s)
	n.tick(t0.Add(4 * time.Second))

	ctx := context.Background()
	k := key(DefaultKeyPrefix, "order", "o-1")
	if ttl := s.Client().PTTL(ctx, k).Val(); ttl != 6*time.Second {
		t.Fatalf("PTTL after 4 s of 10 s = %v, want 6s", ttl)
	}
	if !n.exactNow.Load() {
		t.Fatal("PTTL did not switch to exact mode")
	}
	// Exact mode: a new write's TTL is miniredis's, aged by its clock.
	s.Put("order", "o-2", entry(asOf, `{"a":2}`), 3*time.Second)
	mustFlush(t, s)
	n.tick(t0.Add(6 * time.Second))
	if ttl := s.Client().PTTL(ctx, k).Val(); ttl != 4*time.Second {
		t.Fatalf("PTTL at 6 s = %v, want 4s", ttl)
	}
	n.tick(t0.Add(7 * time.Second))
	if emb.srv.Exists(key(DefaultKeyPrefix, "order", "o-2")) {
		t.Fatal("o-2 outlived its 3 s TTL in exact mode")
	}
	n.tick(t0.Add(10 * time.Second))
	if emb.srv.Exists(k) {
		t.Fatal("o-1 outlived its TTL across the switch")
	}
}

// Rewrites leave stale deadlines behind; the queue is compacted so that it
// stays proportional to the keys, not to the writes.
func TestDeadlineQueueStaysBounded(t *testing.T) {
	emb, err := startEmbeddedServer()
	if err != nil {
		t.Fatal(err)
	}
	defer emb.close()
	n := emb.put
	s := mustOpen(t, Config{URL: "redis://" + emb.addr()})
	asOf := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	now := n.lastTick
	for i := range 3000 {
		s.Put("order", "o-1", entry(asOf.Add(time.Duration(i)*time.Microsecond), `{}`), time.Hour)
		if i%500 == 0 {
			mustFlush(t, s)
			now = now.Add(time.Second)
			n.tick(now)
		}
	}
	mustFlush(t, s)
	n.tick(now.Add(time.Second))
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.due) != 1 || len(n.queue) > 2*len(n.due)+1024 {
		t.Fatalf("%d keys, %d deadlines queued", len(n.due), len(n.queue))
	}
}
