package cluster

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/contrail/contrail/dataplane/cluster/mux"
)

// The control channel carries the few questions nodes ask each other
// outside raft: one JSON request and one JSON answer per connection.
//
//   - state: which groups the answering node has state for (discovery).
//   - join: "add this new incarnation of mine to the group" (rejoin).
//   - transfer: "hand this group's leadership to that node" (balancing).
//   - the operations the layers above register with Node.Handle, whose
//     bodies this package does not read.
//
// Like raft's own traffic it trusts whoever reaches the cluster port.

// The control operations.
const (
	opState    = "state"
	opJoin     = "join"
	opTransfer = "transfer"
)

type ctlRequest struct {
	Op    string `json:"op"`
	From  string `json:"from"`
	Group uint16 `json:"group,omitempty"`
	// ID is the raft id of the incarnation asking to join.
	ID string `json:"id,omitempty"`
	// To is the node a transfer hands the leadership to.
	To string `json:"to,omitempty"`
	// Body is a registered operation's request.
	Body json.RawMessage `json:"body,omitempty"`
}

type ctlResponse struct {
	Node string `json:"node"`
	// State[g] is how much state the node has for group g.
	State []stateLevel `json:"state,omitempty"`
	// Done is true when a join has made the incarnation a voter, or a
	// transfer has completed.
	Done bool `json:"done,omitempty"`
	// Leader names the group's leader when the node asked is not it.
	Leader string `json:"leader,omitempty"`
	Error  string `json:"error,omitempty"`
	// Body is a registered operation's answer.
	Body json.RawMessage `json:"body,omitempty"`
}

// ctlLimit bounds a request's size: they are a few names long.
const ctlLimit = 4 << 10

// ctlAnswerLimit bounds an answer's size: a registered operation may
// answer with a list (a partition's per-stream digests).
const ctlAnswerLimit = 8 << 20

// Handler serves a registered control operation: from is the asking
// node's name, body its request. The answer must be JSON.
type Handler func(from string, group uint16, body json.RawMessage) (json.RawMessage, error)

// Handle registers fn for op. Call it before the node is asked op, once
// per op; an op of this package's own may not be taken.
func (n *Node) Handle(op string, fn Handler) {
	switch op {
	case opState, opJoin, opTransfer:
		panic(fmt.Sprintf("cluster: control operation %q is the cluster's own", op))
	}
	n.handlers.Lock()
	defer n.handlers.Unlock()
	if n.handlers.m == nil {
		n.handlers.m = map[string]Handler{}
	}
	if _, dup := n.handlers.m[op]; dup {
		panic(fmt.Sprintf("cluster: control operation %q registered twice", op))
	}
	n.handlers.m[op] = fn
}

// Call asks the node named peer a registered operation and returns its
// answer; an error the handler returned comes back as an error.
func (n *Node) Call(peer, op string, group uint16, body json.RawMessage) (json.RawMessage, error) {
	resp, err := n.call(peer, ctlRequest{Op: op, Group: group, Body: body})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

func (n *Node) serveControl() {
	defer n.wg.Done()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := n.ctl.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.serveConn(c)
		}()
	}
}

func (n *Node) serveConn(c net.Conn) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(ctlTimeout(opJoin, n.mult)))
	var req ctlRequest
	line, err := bufio.NewReaderSize(c, 512).ReadSlice('\n')
	if err != nil || len(line) > ctlLimit {
		return
	}
	if err := json.Unmarshal(line, &req); err != nil {
		return
	}
	_ = c.SetDeadline(time.Now().Add(ctlTimeout(req.Op, n.mult)))
	resp := n.answer(req)
	resp.Node = n.cfg.Name
	b, _ := json.Marshal(resp)
	_, _ = c.Write(append(b, '\n'))
}

func (n *Node) answer(req ctlRequest) ctlResponse {
	switch req.Op {
	case opState:
		st := make([]stateLevel, len(n.groups))
		for i, g := range n.groups {
			st[i] = g.state()
		}
		return ctlResponse{State: st}
	case opJoin, opTransfer:
		g := n.Group(req.Group)
		if g == nil {
			return ctlResponse{Error: fmt.Sprintf("no group %d", req.Group)}
		}
		var done bool
		var err error
		if req.Op == opJoin {
			if nodeName(raft.ServerID(req.ID)) != req.From {
				return ctlResponse{Error: fmt.Sprintf("%q may not ask for %q to join", req.From, req.ID)}
			}
			done, err = g.admit(req.ID)
		} else {
			done, err = true, n.transferFor(g, req.To)
		}
		if err != nil {
			return ctlResponse{Error: err.Error(), Leader: g.Leader()}
		}
		return ctlResponse{Done: done}
	}
	n.handlers.Lock()
	fn := n.handlers.m[req.Op]
	n.handlers.Unlock()
	if fn == nil {
		return ctlResponse{Error: fmt.Sprintf("unknown op %q", req.Op)}
	}
	body, err := fn(req.From, req.Group, req.Body)
	if err != nil {
		return ctlResponse{Error: err.Error()}
	}
	return ctlResponse{Body: body}
}

// transferFor is the partition leader's half of a balancing move. The
// target must be a voter this leader sees current in the group (more
// than every transfer asks, transferTarget): the meta leader plans from
// the meta group, where a node is current while its incarnation in this
// group may be lost (wiped, its successor not yet admitted, the
// configuration still naming the old id as a voter) or in repair. A transfer to a lost
// incarnation never completes, and while one runs raft refuses
// membership changes: with the balancer retrying every pass, the leader
// could never admit the node's new incarnation, and the node stayed out
// of the group (found by the RepairKills fault scenario).
func (n *Node) transferFor(g *Group, to string) error {
	if n.draining.Load() {
		return errDraining
	}
	if !g.IsLeader() {
		return ErrNotLeader
	}
	if to != "" {
		if rep, ok := g.replica(to); !ok || !rep.Voter || !rep.Current {
			return fmt.Errorf("group %d: to %q (%+v): %w", g.id, to, rep, ErrNotCurrent)
		}
	}
	return g.TransferLeadership(to)
}

// callTimeout bounds a registered operation's exchange (times the
// timing multiplier): its handler must answer from what it has.
const callTimeout = 10 * time.Second

// ctlTimeout bounds one control exchange: joins and transfers wait for
// raft to append a membership change or hand over leadership.
func ctlTimeout(op string, mult time.Duration) time.Duration {
	switch op {
	case opState:
		return time.Second * mult
	case opJoin, opTransfer:
		return configTimeout + time.Second*mult
	}
	return callTimeout * mult
}

// call sends req to the node named peer and returns its answer.
func (n *Node) call(peer string, req ctlRequest) (ctlResponse, error) {
	addr, ok := n.addr(peer)
	if !ok {
		return ctlResponse{}, fmt.Errorf("no address for %q", peer)
	}
	timeout := ctlTimeout(req.Op, n.mult)
	c, err := n.cfg.Mux.Dial(addr, mux.KindControl, 0, timeout)
	if err != nil {
		return ctlResponse{}, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	req.From = n.cfg.Name
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return ctlResponse{}, fmt.Errorf("%s %s: %w", req.Op, peer, err)
	}
	line, err := bufio.NewReaderSize(io.LimitReader(c, ctlAnswerLimit), 1024).ReadBytes('\n')
	if err != nil {
		return ctlResponse{}, fmt.Errorf("%s %s: %w", req.Op, peer, err)
	}
	var resp ctlResponse
	if err := json.Unmarshal(line, &resp); err != nil {
		return ctlResponse{}, fmt.Errorf("%s %s: %w", req.Op, peer, err)
	}
	if resp.Node != peer {
		return ctlResponse{}, fmt.Errorf("%s %s: answered by %q", req.Op, peer, resp.Node)
	}
	if resp.Error != "" {
		return resp, fmt.Errorf("%s %s: %w", req.Op, peer, errors.New(resp.Error))
	}
	return resp, nil
}

// others is every peer's name but this node's.
func (n *Node) others() []string {
	var names []string
	for name := range n.cfg.Peers {
		if name != n.cfg.Name {
			names = append(names, name)
		}
	}
	return names
}

// askStates asks every peer how much state it has for each group. all
// is true if every peer answered.
func (n *Node) askStates() (answers [][]stateLevel, all bool) {
	peers := n.others()
	res := make([][]stateLevel, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := n.call(p, ctlRequest{Op: opState})
			if err != nil {
				return
			}
			if len(resp.State) != len(n.groups) {
				n.log.Error("peer runs a different number of groups", "peer", p, "peer_groups", len(resp.State), "groups", len(n.groups))
				return
			}
			res[i] = resp.State
		}()
	}
	wg.Wait()
	all = true
	for _, st := range res {
		if st == nil {
			all = false
			continue
		}
		answers = append(answers, st)
	}
	return answers, all
}
