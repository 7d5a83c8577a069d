package server

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
)

// Every seek is bounded in bytes before it is served. Its keys are decoded
// only up to keyLimit, the most a response of Options.MaxResponseBytes can
// answer; its decoded keys and its response are counted, beyond
// FreeReplyBytes, against the in-flight budget that frame bodies share, as
// they grow; and a response that reaches MaxResponseBytes is dropped. A
// request refused for any of these is answered EREQUEST (1003), which brpc
// does not retry, and counted in cube_requests_total by its result.

// Large requests take turns. A seek of more than HeavyKeys keys holds one
// of ceil(HeavyShare × GOMAXPROCS) places while it is served (a quarter of the
// cores by default), so that requests asking for millions of values (whatever
// becomes of them) leave the other cores to ordinary ones; one that waits
// longer than heavyWait for a place is refused as busy. Their work is also
// paced (pacer) to HeavyShare of the cores over time, which a share below one
// core's worth needs.
const (
	// HeavyKeys: a seek of more keys is a large request.
	HeavyKeys = 4096
	heavyWait = time.Second
)

// heavyTurn waits for a large request's turn; false if it did not come
// within heavyWait. done gives the place back.
func (s *Server) heavyTurn() (ok bool, done func()) {
	select {
	case s.heavy <- struct{}{}:
	default:
		t := time.NewTimer(heavyWait)
		defer t.Stop()
		select {
		case s.heavy <- struct{}{}:
		case <-t.C:
			return false, nil
		}
	}
	return true, func() { <-s.heavy }
}

func (s *Server) heavyBusyError() error {
	return &refusal{"busy", fmt.Errorf("requests of more than %d keys are all being served (%d at a time); retry later", HeavyKeys, cap(s.heavy))}
}

// keyLimit is the most keys one seek may ask for: Options.MaxKeys when set,
// and never more than a response of MaxResponseBytes can answer, every key
// costing at least a miss.
func keyLimit(o Options) int {
	n := o.MaxResponseBytes / missSize
	if o.MaxKeys > 0 {
		n = min(n, o.MaxKeys)
	}
	return n
}

// tooManyKeys is the refusal of a request with more than keyLimit keys.
func (s *Server) tooManyKeys() string {
	if s.opts.MaxKeys > 0 && s.opts.MaxKeys == s.keyLimit {
		return fmt.Sprintf("more than %d keys in one request (cube server --max-keys %d)", s.opts.MaxKeys, s.opts.MaxKeys)
	}
	return fmt.Sprintf("more than %d keys in one request: their response would exceed %d bytes (cube server --max-response-bytes)",
		s.keyLimit, s.opts.MaxResponseBytes)
}

// refusal is a request refused for its size; result is its label in
// cube_requests_total.
type refusal struct {
	result string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

func (s *Server) responseTooLarge() error {
	return &refusal{"too_large", fmt.Errorf("the response exceeds %d bytes (cube server --max-response-bytes); ask for fewer keys", s.opts.MaxResponseBytes)}
}

func (s *Server) outOfMemory() error {
	return &refusal{"memory", fmt.Errorf("requests being served hold more than %d bytes (cube server --max-inflight-bytes); retry later", s.opts.MaxInflightBytes)}
}

// reply counts one request's decoded keys and response against the in-flight
// budget, beyond FreeReplyBytes.
type reply struct {
	budget   *byteBudget
	reserved int64
}

// cover counts total bytes of keys and response, taking from the budget
// what is not counted yet; false if the budget cannot take it.
func (r *reply) cover(total int) bool {
	need := int64(total) - FreeReplyBytes - r.reserved
	if need <= 0 {
		return true
	}
	if !r.budget.take(need) {
		return false
	}
	r.reserved += need
	return true
}

// release gives back what cover took.
func (r *reply) release() {
	r.budget.give(r.reserved)
	r.reserved = 0
}

// isRefusal reports a refusal and its result label.
func isRefusal(err error) (*refusal, bool) {
	var r *refusal
	ok := errors.As(err, &r)
	return r, ok
}

// pacer keeps the large requests' work within rate cores over time. Each slice of a large
// request's work (yieldEvery+1 keys) is paid for: at rate r, d of work takes d/r of the lane's
// time, and a slice that finishes ahead of what the lane has paid sleeps the difference. Time
// the lane sat idle is not saved up.
type pacer struct {
	mu   sync.Mutex
	rate float64   // cores
	paid time.Time // when the work done so far is paid for at rate
}

// pay records a slice of work that ran from start to now, and returns how long its request
// must pause before its next slice.
func (p *pacer) pay(start, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paid.Before(start) {
		p.paid = start
	}
	p.paid = p.paid.Add(time.Duration(float64(now.Sub(start)) / p.rate))
	return p.paid.Sub(now)
}

// minPause: a pause shorter than this is not taken (a sleep takes about that long anyway); what
// it would have paid stays owed, so the share holds.
const minPause = 100 * time.Microsecond

// pace ends a slice of a large request's work begun at *start: it pauses the request when
// the large requests run ahead of their share, else lets the others on its core run, and
// starts the next slice.
func (s *Server) pace(start *time.Time) {
	now := time.Now()
	if wait := s.heavyPace.pay(*start, now); wait > minPause {
		time.Sleep(wait)
		s.m.heavyPaused.Add(wait.Seconds())
	} else {
		runtime.Gosched()
	}
	*start = time.Now()
}
