package redisstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Watch implements idem.Watcher with Redis pub/sub. Begin (when it replaces
// an existing record) and Finish publish on a channel named like the record's
// key, in the same script that changes the record; ExtendLease does not.
//
// All watches of a Store share one pub/sub connection, opened on the first
// Watch. Watch returns once the server has confirmed the subscription, so a
// caller that watches, then reads the record with Get, then waits on the
// channel cannot miss a change made after its read. The channel is closed on
// the first change after that, and also, as a "look again", when the
// subscription had to be re-established after a lost connection (a change may
// have gone by unseen), when ctx ends before the subscription was confirmed,
// when subscribing fails, or when the Store is closed. Watch waits for the
// confirmation at most about a second (readyTimeout), then returns with the
// channel closed as well: a server that refuses the SUBSCRIBE (an ACL user
// without the channel, see the package documentation) never confirms it,
// and a caller that watches with its whole wait deadline must be able to
// poll meanwhile. Callers must treat it
// as a hint, re-read the record, and keep a timeout of their own: pub/sub
// delivers at most once. stop releases the watch (and the subscription when it
// was the channel's last watcher); call it in every case.
//
// With Options.DisableNotify the channel never reports a change.
func (s *Store) Watch(ctx context.Context, key string) (<-chan struct{}, func()) {
	w := &waiter{ch: make(chan struct{})}
	if s.notify != 1 || key == "" {
		return w.ch, func() {}
	}
	h := s.getHub()
	if h == nil {
		w.fire()
		return w.ch, func() {}
	}
	channel := s.key(key)
	ready, err := h.add(ctx, channel, w)
	if err != nil {
		w.fire()
		return w.ch, func() {}
	}
	t := time.NewTimer(readyTimeout)
	select {
	case <-ready:
	case <-ctx.Done():
		w.fire()
	case <-h.done:
		w.fire()
	case <-t.C:
		w.fire()
		h.resubscribe(ctx, channel)
	}
	t.Stop()
	return w.ch, func() { h.remove(channel, w) }
}

// readyTimeout bounds Watch's wait for the server to confirm a subscription.
const readyTimeout = time.Second

func (s *Store) getHub() *hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.hub == nil {
		s.hub = newHub(s.client.Subscribe(context.Background()))
	}
	return s.hub
}

type waiter struct {
	ch   chan struct{}
	once sync.Once
}

func (w *waiter) fire() { w.once.Do(func() { close(w.ch) }) }

// watchSet is the set of waiters on one channel.
type watchSet struct {
	waiters   map[*waiter]struct{}
	ready     chan struct{} // closed when the server confirmed the subscription
	confirmed bool
}

// hub multiplexes the watches of a Store over one *redis.PubSub.
type hub struct {
	ps   *redis.PubSub
	done chan struct{} // closed when the dispatcher has stopped

	mu   sync.Mutex
	sets map[string]*watchSet
	// pending counts, per channel, SUBSCRIBE commands sent and not yet
	// confirmed; a confirmation nobody waits for is a resubscription after a
	// reconnect. A SUBSCRIBE whose watch ended before its confirmation, on a
	// connection that then dropped, is never confirmed (go-redis resubscribes
	// only the channels still subscribed); nor is one the server refused. Its
	// count would hold back the confirmation of every later subscription of
	// the channel, so a count left unconfirmed for readyTimeout is dropped
	// (add, resubscribe). Channels are per key, so the count of a channel
	// nobody watches any longer must not stay either: remove puts a channel
	// whose last watcher leaves before the confirmation into unconfirmed, and
	// add and remove drop its count once it has been unconfirmed for
	// readyTimeout (dropStale), unless the channel is watched again.
	pending map[string]pendingSub
	// unconfirmed are the channels remove left with a count in pending, in
	// the order it left them, with when (see dropStale).
	unconfirmed []unwatched
	closed      bool
}

// unwatched is a channel whose last watcher left before the server
// confirmed its subscription, and when.
type unwatched struct {
	channel string
	at      time.Time
}

// pendingSub is the count of a channel's unconfirmed SUBSCRIBE commands and
// when the last one was sent.
type pendingSub struct {
	n    int
	sent time.Time
}

var errHubClosed = errors.New("redisstore: store closed")

func newHub(ps *redis.PubSub) *hub {
	h := &hub{
		ps:      ps,
		done:    make(chan struct{}),
		sets:    make(map[string]*watchSet),
		pending: make(map[string]pendingSub),
	}
	msgs := ps.ChannelWithSubscriptions(redis.WithChannelSize(1024))
	go h.dispatch(msgs)
	return h
}

func (h *hub) add(ctx context.Context, channel string, w *waiter) (<-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, errHubClosed
	}
	ws := h.sets[channel]
	if ws == nil {
		now := time.Now()
		h.dropStale(now)
		ws = &watchSet{waiters: make(map[*waiter]struct{}), ready: make(chan struct{})}
		h.sets[channel] = ws
		p := h.pending[channel]
		if p.n > 0 && now.Sub(p.sent) >= readyTimeout {
			p.n = 0 // stale: never to be confirmed
		}
		h.pending[channel] = pendingSub{n: p.n + 1, sent: now}
		// Written while h.mu is held, so SUBSCRIBE and UNSUBSCRIBE of one
		// channel reach the server in the order of the map's changes.
		if err := h.ps.Subscribe(ctx, channel); err != nil {
			delete(h.sets, channel)
			h.unpend(channel)
			_ = h.ps.Unsubscribe(context.WithoutCancel(ctx), channel)
			return nil, err
		}
	}
	ws.waiters[w] = struct{}{}
	return ws.ready, nil
}

// resubscribe subscribes channel again when its watch set is still waiting
// for the server's confirmation after readyTimeout, dropping the counts of
// the SUBSCRIBE commands sent before: they were refused, or lost with a
// connection. (If one is confirmed late after all, its confirmation is taken
// for a resubscription and wakes the set's waiters: a harmless "look again".)
func (h *hub) resubscribe(ctx context.Context, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.sets[channel]
	if h.closed || ws == nil || ws.confirmed {
		return
	}
	h.pending[channel] = pendingSub{n: 1, sent: time.Now()}
	if err := h.ps.Subscribe(context.WithoutCancel(ctx), channel); err != nil {
		h.unpend(channel)
	}
}

func (h *hub) remove(channel string, w *waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ws := h.sets[channel]
	if ws == nil {
		return
	}
	if _, ok := ws.waiters[w]; !ok {
		return
	}
	delete(ws.waiters, w)
	if len(ws.waiters) == 0 {
		delete(h.sets, channel)
		if h.closed {
			return
		}
		_ = h.ps.Unsubscribe(context.Background(), channel)
		now := time.Now()
		h.dropStale(now)
		if h.pending[channel].n > 0 {
			h.unconfirmed = append(h.unconfirmed, unwatched{channel, now})
		}
	}
}

// dropStale drops the counts in pending of the channels remove left
// unconfirmed readyTimeout or more before now, unless they are watched again
// (the watch set then handles its count: add, resubscribe) or a SUBSCRIBE was
// sent since (a later remove put the channel in unconfirmed again). The
// server refused those SUBSCRIBE commands (no right to the channel), or they
// were lost with a connection that dropped after their watch ended (go-redis
// resubscribes only the channels still subscribed): no confirmation is to
// come. Were one to come after all, it is taken for a resubscription (it
// wakes the waiters of the channel, if any, to look again), or it confirms a
// later subscription of the channel early, as a count dropped by add does.
// Each remove that leaves a count adds one entry to unconfirmed, and each
// call drops every entry old enough, so unconfirmed and pending hold no more
// than the channels of about readyTimeout of watches, plus those being
// watched.
func (h *hub) dropStale(now time.Time) {
	i := 0
	for ; i < len(h.unconfirmed); i++ {
		u := h.unconfirmed[i]
		if now.Sub(u.at) < readyTimeout {
			break
		}
		if p, ok := h.pending[u.channel]; ok && h.sets[u.channel] == nil && !p.sent.After(u.at) {
			delete(h.pending, u.channel)
		}
		h.unconfirmed[i] = unwatched{}
	}
	h.unconfirmed = h.unconfirmed[i:]
}

func (h *hub) unpend(channel string) int {
	p := h.pending[channel]
	p.n--
	if p.n <= 0 {
		delete(h.pending, channel)
		return 0
	}
	h.pending[channel] = p
	return p.n
}

func (h *hub) dispatch(msgs <-chan any) {
	defer close(h.done)
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Message:
			h.mu.Lock()
			if ws := h.sets[m.Channel]; ws != nil {
				for w := range ws.waiters {
					w.fire()
				}
			}
			h.mu.Unlock()
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			h.mu.Lock()
			ws := h.sets[m.Channel]
			if h.pending[m.Channel].n > 0 {
				if h.unpend(m.Channel) == 0 && ws != nil && !ws.confirmed {
					ws.confirmed = true
					close(ws.ready)
				}
			} else if ws != nil {
				// Resubscribed after a reconnect: a change may have been missed.
				for w := range ws.waiters {
					w.fire()
				}
			}
			h.mu.Unlock()
		}
	}
	// The PubSub was closed: wake everyone.
	h.mu.Lock()
	for _, ws := range h.sets {
		for w := range ws.waiters {
			w.fire()
		}
	}
	h.mu.Unlock()
}

func (h *hub) close() error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	err := h.ps.Close()
	<-h.done
	return err
}
