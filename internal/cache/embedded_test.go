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
	emb, err := startEmbedded()
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
	// EVAL runs the Lua once, which caches the script; EVALSHA is then native.
	if n, err := putScript.Eval(ctx, p.native, []string{"k"}, args...).Int(); err != nil || n != 1 {
		t.Fatalf("EVAL = %d, %v", n, err)
	}
	if p.emb.put.answered.Load() != 0 {
		t.Fatal("the first EVAL was answered natively; miniredis would not know the script")
	}
	if exists := p.native.ScriptExists(ctx, putScript.Hash()).Val(); len(exists) != 1 || !exists[0] {
		t.Fatalf("SCRIPT EXISTS after EVAL = %v", exists)
	}
	if n, err := putScript.EvalSha(ctx, p.native, []string{"k"}, args...).Int(); err != nil || n != 0 {
		t.Fatalf("EVALSHA of an equal as_of = %d, %v, want 0", n, err)
	}
	if p.emb.put.answered.Load() != 1 {
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
	if p.emb.put.answered.Load() != 2 {
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
