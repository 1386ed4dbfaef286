package cache

import (
	"bufio"
	"container/heap"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/alicebob/miniredis/v2/server"
)

// embeddedTick is how often the embedded server's clock is advanced, hence
// how late past its TTL an entry may still be served. The aggregation checks
// each dependency's max age itself, so a second is harmless.
const embeddedTick = time.Second

// embedded is the in-process Redis-protocol server used when no URL is given.
// miniredis only ages keys when told to, so a goroutine it owns moves its
// clock forward with real time; without it no TTL would ever expire.
type embedded struct {
	srv   *miniredis.Miniredis
	put   *nativePut
	clock bool // runClock was started
	stop  chan struct{}
	done  chan struct{}
}

// startEmbedded starts the server on a loopback port and its clock, with
// putScript answered natively (see nativePut).
func startEmbedded() (*embedded, error) {
	e, err := startEmbeddedServer()
	if err != nil {
		return nil, err
	}
	e.clock = true
	go e.runClock(embeddedTick)
	return e, nil
}

// startEmbeddedServer is startEmbedded without the clock, which a test then
// drives by calling put.tick itself.
func startEmbeddedServer() (*embedded, error) {
	srv := miniredis.NewMiniRedis()
	if err := srv.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("cache: start embedded server: %w", err)
	}
	e := &embedded{srv: srv, put: newNativePut(srv, time.Now()), stop: make(chan struct{}), done: make(chan struct{})}
	srv.Server().SetPreHook(e.put.hook)
	return e, nil
}

// runClock expires keys tick by tick, with real time, until close.
func (e *embedded) runClock(every time.Duration) {
	defer close(e.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			e.put.tick(now)
		case <-e.stop:
			return
		}
	}
}

// addr is the server's host:port.
func (e *embedded) addr() string { return e.srv.Addr() }

// close stops the clock, waits for it, and stops the server.
func (e *embedded) close() {
	close(e.stop)
	if e.clock {
		<-e.done
	}
	e.srv.Close()
}

// nativePut answers putScript in Go inside the embedded server, instead of
// miniredis's Lua interpreter, and expires what it wrote itself. miniredis
// builds a fresh Lua state, standard libraries included, for every script
// call, and ages TTLs by sorting every key it holds on every tick, under the
// lock every command takes: with a write per live section these were most
// of the embedded demo's CPU (0.44–0.53× the pages/s of the same binary with
// redis-server, issue #17), and the sort grows with the keys.
//
// Everything else is untouched, so the demo still runs the whole go-redis
// path a deployment runs: pooled connections, pipelined EVALSHA, the
// NOSCRIPT fallback to EVAL, the hooks, HMGET and the decoder. It is a
// miniredis pre-command hook: it sees every command first, answers a call of
// putScript whose arguments have the writer's shape, and lets miniredis
// answer everything else, including any call it does not fully recognise
// (which then runs the Lua, so the outcome is the script's either way).
//
// Script cache: EVALSHA of putScript is answered natively only once the
// script has reached miniredis (EVAL or SCRIPT LOAD), and not after SCRIPT
// FLUSH, so NOSCRIPT is returned exactly when Redis would. An EVAL of it
// loads the script into miniredis's cache, as Redis would, before the
// answer.
//
// Atomicity: the compare and the write are one step among puts (mu). A
// reader can see no intermediate state that Redis would hide, except a miss
// for a moment when a non-hash value (corrupt anyway) is replaced: the new
// hash replaces the old one in one HSET, fields the script would have
// dropped with DEL are dropped right after, and the TTL comes last.
//
// Expiry: while the server sees only the store's own traffic (fast mode),
// the keys written here are expired from an index of their deadlines, each
// tick costing only the keys due, and miniredis's own TTL clock stands
// still. The first other command (one that may set, move or read a TTL, or
// any command the store never sends: a test or an operator poking at the
// keys) switches to exact mode for good: every indexed key gets its true
// remaining TTL and miniredis's clock runs every tick as it always did.
//
// A connection that selects another database or opens a transaction (the
// store does neither) is left to miniredis for good: the hook cannot see
// which database a connection uses or queue into its transaction.
type nativePut struct {
	srv      *miniredis.Miniredis
	sha      string // putScript's SHA1, hex
	loaded   atomic.Bool
	answered atomic.Int64 // calls answered natively, for tests

	// mu makes each put one step, and guards the expiry state.
	mu       sync.Mutex
	exact    bool        // miniredis's clock runs; the index is unused
	exactNow atomic.Bool // exact, readable without mu on every command
	lastTick time.Time   // when miniredis's TTLs were last aged
	due      map[string]time.Time
	queue    deadlines

	bypassMu sync.Mutex
	bypass   map[*server.Peer]struct{}
	bypassN  atomic.Int32 // len(bypass), read without the lock on every command
}

func newNativePut(srv *miniredis.Miniredis, now time.Time) *nativePut {
	return &nativePut{srv: srv, sha: putScript.Hash(), lastTick: now,
		due: map[string]time.Time{}, bypass: map[*server.Peer]struct{}{}}
}

// storeCommands are what Store sends besides the script, plus commands that
// touch no key: none of them sets, moves or reads a TTL, so fast mode holds.
var storeCommands = map[string]bool{
	"HMGET": true, "PING": true, "HELLO": true, "CLIENT": true, "AUTH": true,
	"ECHO": true, "INFO": true, "COMMAND": true, "QUIT": true,
}

// hook is the server's pre-command hook: true when it has answered.
func (n *nativePut) hook(c *server.Peer, cmd string, args ...string) bool {
	switch cmd {
	case "EVALSHA":
		if len(args) == 0 || !strings.EqualFold(args[0], n.sha) {
			n.goExact() // another script: it may set a TTL
			return false
		}
		if !n.loaded.Load() {
			return false // NOSCRIPT, as Redis answers
		}
	case "EVAL":
		if len(args) == 0 || !n.isScript(args[0]) {
			n.goExact()
			return false
		}
		if !n.loaded.Load() {
			n.load(args[0])
		}
	case "SCRIPT":
		n.script(args)
		return false
	case "MULTI", "SELECT":
		n.goExact()
		n.leave(c)
		return false
	default:
		if !storeCommands[cmd] {
			n.goExact()
		}
		return false
	}
	if n.bypassN.Load() > 0 && n.bypassed(c) {
		return false
	}
	if n.put(c, args[1:]) {
		return true
	}
	n.goExact() // the Lua will run, and may set a TTL
	return false
}

// load puts the script into miniredis's script cache, as EVAL does in
// Redis, through miniredis's own SCRIPT LOAD (which this hook sees too).
func (n *nativePut) load(src string) {
	n.srv.Server().Dispatch(server.NewPeer(bufio.NewWriter(io.Discard)), []string{"SCRIPT", "LOAD", src})
}

// script follows SCRIPT LOAD and SCRIPT FLUSH; miniredis still answers them.
func (n *nativePut) script(args []string) {
	if len(args) == 0 {
		return
	}
	switch strings.ToUpper(args[0]) {
	case "LOAD":
		if len(args) == 2 && n.isScript(args[1]) {
			n.loaded.Store(true)
		}
	case "FLUSH":
		n.loaded.Store(false)
	}
}

// isScript reports whether src is putScript's source. Only EVAL and SCRIPT
// LOAD carry a source, and the writer sends it only after NOSCRIPT, so
// hashing it is rare.
func (n *nativePut) isScript(src string) bool {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:]) == n.sha
}

// leave hands the connection's commands to miniredis until it closes.
func (n *nativePut) leave(c *server.Peer) {
	n.bypassMu.Lock()
	defer n.bypassMu.Unlock()
	if _, ok := n.bypass[c]; ok {
		return
	}
	n.bypass[c] = struct{}{}
	n.bypassN.Add(1)
	// Disconnect handlers run on the connection's own goroutine, the one
	// that runs this hook, so registering here is safe.
	c.OnDisconnect(func() {
		n.bypassMu.Lock()
		delete(n.bypass, c)
		n.bypassN.Add(-1)
		n.bypassMu.Unlock()
	})
}

func (n *nativePut) bypassed(c *server.Peer) bool {
	n.bypassMu.Lock()
	defer n.bypassMu.Unlock()
	_, ok := n.bypass[c]
	return ok
}

// put runs putScript on args (numkeys, key, ARGV[1..5]) and answers, or
// returns false, having done nothing, for arguments the writer would never
// send: the Lua then gives whatever answer or error the script gives.
func (n *nativePut) put(c *server.Peer, args []string) bool {
	if len(args) != 7 || args[0] != "1" {
		return false
	}
	k, version, asOfText, payload, ttlText, limitText := args[1], args[2], args[3], args[4], args[5], args[6]
	asOf, okA := luaToNumber(asOfText)
	limit, okL := luaToNumber(limitText)
	ttlMS, err := strconv.ParseInt(ttlText, 10, 64)
	if !okA || !okL || err != nil || ttlMS <= 0 || ttlMS > int64(time.Duration(1<<62)/time.Millisecond) {
		return false
	}
	ttl := time.Duration(ttlMS) * time.Millisecond

	n.mu.Lock()
	defer n.mu.Unlock()
	isHash := n.srv.Type(k) == "hash"
	if isHash {
		if cur, ok := luaToNumber(n.srv.HGet(k, fieldAsOf)); ok && cur >= asOf && cur <= limit {
			n.answered.Add(1)
			c.WriteInt(0)
			return true
		}
	}
	var extra []string
	if isHash {
		fields, _ := n.srv.HKeys(k)
		for _, f := range fields {
			if f != fieldVersion && f != fieldAsOf && f != fieldPayload {
				extra = append(extra, f)
			}
		}
	}
	n.srv.HSet(k, fieldVersion, version, fieldAsOf, asOfText, fieldPayload, payload)
	for _, f := range extra {
		n.srv.HDel(k, f)
	}
	n.srv.SetTTL(k, ttl)
	if !n.exact {
		// miniredis's TTLs stand still in fast mode: the deadline counts
		// from its last tick, as its own clock would.
		at := n.lastTick.Add(ttl)
		n.due[k] = at
		heap.Push(&n.queue, deadline{at: at, key: k})
	}
	n.answered.Add(1)
	c.WriteInt(1)
	return true
}

// tick ages the keys to now: in fast mode, deletes the indexed keys due; in
// exact mode, runs miniredis's clock.
func (n *nativePut) tick(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	elapsed := now.Sub(n.lastTick)
	if elapsed <= 0 {
		return
	}
	n.lastTick = now
	if n.exact {
		n.srv.FastForward(elapsed)
		return
	}
	for len(n.queue) > 0 && !n.queue[0].at.After(now) {
		d := heap.Pop(&n.queue).(deadline)
		if at, ok := n.due[d.key]; ok && at.Equal(d.at) {
			delete(n.due, d.key)
			n.srv.Del(d.key)
		}
	}
	// A rewritten key leaves its old deadline behind; drop those once they
	// are the bulk of the queue.
	if len(n.queue) > 2*len(n.due)+1024 {
		n.queue = n.queue[:0]
		for k, at := range n.due {
			n.queue = append(n.queue, deadline{at: at, key: k})
		}
		heap.Init(&n.queue)
	}
}

// goExact switches to exact mode: every indexed key gets the TTL it has
// left as of miniredis's last tick, from which its clock will run.
func (n *nativePut) goExact() {
	if n.exactNow.Load() {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exact {
		return
	}
	for k, at := range n.due {
		if left := at.Sub(n.lastTick); left > 0 {
			n.srv.SetTTL(k, left)
		} else {
			n.srv.Del(k)
		}
	}
	n.due, n.queue = nil, nil
	n.exact = true
	n.exactNow.Store(true)
}

// deadline is when a key written natively expires; deadlines is their
// min-heap.
type deadline struct {
	at  time.Time
	key string
}

type deadlines []deadline

func (d deadlines) Len() int           { return len(d) }
func (d deadlines) Less(i, j int) bool { return d[i].at.Before(d[j].at) }
func (d deadlines) Swap(i, j int)      { d[i], d[j] = d[j], d[i] }
func (d *deadlines) Push(x any)        { *d = append(*d, x.(deadline)) }
func (d *deadlines) Pop() any {
	old := *d
	x := old[len(old)-1]
	*d = old[:len(old)-1]
	return x
}

// luaToNumber is tonumber(s) of the Lua interpreter miniredis embeds
// (gopher-lua): spaces, tabs and newlines trimmed; a decimal point means a
// float, a 0x prefix a hexadecimal integer, anything else a decimal integer;
// ok is false where tonumber gives nil. Comparing its results as float64 is
// what the script's comparisons do.
func luaToNumber(s string) (float64, bool) {
	s = strings.Trim(s, " \n\t")
	if strings.Contains(s, ".") {
		v, err := strconv.ParseFloat(s, 64)
		return v, err == nil
	}
	base := 10
	if len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X") {
		base, s = 16, s[2:]
	}
	v, err := strconv.ParseInt(s, base, 64)
	return float64(v), err == nil
}
