package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Account is one account in the ledger.
type Account struct {
	Owner   string `json:"owner"`
	Balance int64  `json:"balance"`
}

// Transaction is a completed or scheduled movement of money.
type Transaction struct {
	ID     string `json:"id"`
	Status string `json:"status"` // "completed" or "scheduled"
	From   string `json:"from_account"`
	To     string `json:"to_account"`
	Amount int64  `json:"amount"`
	Memo   string `json:"memo,omitempty"`
	When   string `json:"when,omitempty"`
	At     string `json:"at"`
	// Actor is the signed-in user who made the transaction (its token's
	// sub); empty when the bank has no sign-in.
	Actor string `json:"actor,omitempty"`
}

// State is the whole ledger as stored on disk.
type State struct {
	Accounts     map[string]*Account `json:"accounts"`
	Transactions []Transaction       `json:"transactions"`
	NextID       int64               `json:"next_id"`
}

// demoState is what a missing state file starts as.
func demoState() *State {
	return &State{
		Accounts: map[string]*Account{
			"1102534471":  {Owner: "u_01", Balance: 2_000_000},
			"110-222-333": {Owner: "landlord", Balance: 0},
			"220-555-010": {Owner: "u_01 savings", Balance: 500_000},
			"330-000-001": {Owner: "utility", Balance: 10_000},
		},
		NextID: 1,
	}
}

// Failure is a business-level refusal (unknown account, insufficient
// funds): the call completed and did nothing, reported as isError.
type Failure struct{ Msg string }

func (f *Failure) Error() string { return f.Msg }

// Ledger guards the state file. Several bank processes may share one file
// (a gate and an executor each start their own over stdio), so every
// operation re-reads the file under an exclusive flock on a sibling lock
// file; the mutex only serializes this process's own goroutines.
type Ledger struct {
	path string
	mu   sync.Mutex
}

// OpenLedger returns a ledger on path, creating it with demo accounts if
// it does not exist.
func OpenLedger(path string) (*Ledger, error) {
	l := &Ledger{path: path}
	err := l.update(func(*State) error { return nil })
	if err != nil {
		return nil, err
	}
	return l, nil
}

// View runs fn on a snapshot of the state.
func (l *Ledger) View(fn func(*State) error) error {
	return l.locked(func() error {
		st, err := l.load()
		if err != nil {
			return err
		}
		return fn(st)
	})
}

// update runs fn on the state and writes it back atomically if fn
// succeeds. A failing fn leaves the file untouched.
func (l *Ledger) update(fn func(*State) error) error {
	return l.View(func(st *State) error {
		if err := fn(st); err != nil {
			return err
		}
		return l.save(st)
	})
}

func (l *Ledger) locked(fn func() error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	lf, err := os.OpenFile(l.path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("ledger lock: %w", err)
	}
	defer lf.Close()
	if err := syscall.Flock(int(lf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("ledger lock: %w", err)
	}
	defer syscall.Flock(int(lf.Fd()), syscall.LOCK_UN)
	return fn()
}

func (l *Ledger) load() (*State, error) {
	b, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return demoState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger read: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, fmt.Errorf("ledger %s: %w", l.path, err)
	}
	if st.Accounts == nil {
		st.Accounts = map[string]*Account{}
	}
	return &st, nil
}

// save writes st to a temporary file in the same directory, syncs it and
// renames it over the old file, so a crash leaves either the old or the
// new ledger, never a torn one.
func (l *Ledger) save(st *State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(l.path)
	tmp, err := os.CreateTemp(dir, filepath.Base(l.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("ledger write: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after a successful rename
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("ledger write: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("ledger write: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("ledger write: %w", err)
	}
	if err := os.Rename(tmp.Name(), l.path); err != nil {
		return fmt.Errorf("ledger write: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// Transfer records the transaction t describes (From, To, Amount, Memo,
// When, Actor): it moves the amount now, or schedules it when When is set
// (a scheduled transfer reserves nothing: it is a promise the bank keeps at
// that time, outside this example). It returns the transaction recorded
// and the balance of From after it.
func (l *Ledger) Transfer(ctx context.Context, t Transaction) (Transaction, int64, error) {
	from, to := t.From, t.To
	var tx Transaction
	var balanceAfter int64
	err := l.update(func(st *State) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		src, ok := st.Accounts[from]
		if !ok {
			return &Failure{fmt.Sprintf("unknown account %q", from)}
		}
		if _, ok := st.Accounts[to]; !ok {
			return &Failure{fmt.Sprintf("unknown account %q", to)}
		}
		if from == to {
			return &Failure{"from_account and to_account are the same"}
		}
		tx = Transaction{
			ID:     fmt.Sprintf("tx_%06d", st.NextID),
			From:   from,
			To:     to,
			Amount: t.Amount,
			Memo:   t.Memo,
			When:   t.When,
			At:     time.Now().UTC().Format(time.RFC3339Nano),
			Actor:  t.Actor,
		}
		st.NextID++
		if t.When != "" {
			tx.Status = "scheduled"
		} else {
			if src.Balance < t.Amount {
				return &Failure{fmt.Sprintf("insufficient funds: balance %d, amount %d", src.Balance, t.Amount)}
			}
			src.Balance -= t.Amount
			st.Accounts[to].Balance += t.Amount
			tx.Status = "completed"
		}
		balanceAfter = src.Balance
		st.Transactions = append(st.Transactions, tx)
		return nil
	})
	return tx, balanceAfter, err
}
