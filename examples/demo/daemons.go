package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/verdictgate/verdict/api"
	"github.com/verdictgate/verdict/api/apijson"
	"github.com/verdictgate/verdict/client"
)

// connect makes the clients the agent calls the daemons with.
func (d *demo) connect() error {
	var err error
	if d.vd, err = client.New(d.verdictd, client.WithToken(agentToken), client.WithAdminToken(adminToken)); err != nil {
		return err
	}
	d.ex, err = client.New(d.executor, client.WithToken(agentToken), client.WithAdminToken(adminToken))
	return err
}

// preflight runs one preflight through the client. The walk builds requests and prints records
// as plain JSON, so the request goes through the strict reader first (a typo in the script is
// an error, as it would be at verdictd) and the record comes back as generic JSON.
func (d *demo) preflight(req map[string]any) (map[string]any, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var r api.Request
	if err := apijson.UnmarshalStrict(b, &r); err != nil {
		return nil, fmt.Errorf("the demo's request: %w", err)
	}
	rec, err := d.vd.Preflight(context.Background(), &r)
	if err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	out, err := apijson.AppendRecord(nil, rec)
	if err != nil {
		return nil, err
	}
	return generic(out)
}

// present hands a verdict and arguments to the executor through the client and returns the
// HTTP status and the answer as generic JSON: a refusal is an answer too.
func (d *demo) present(verdict string, args any) (int, map[string]any, error) {
	b, err := json.Marshal(args)
	if err != nil {
		return 0, nil, err
	}
	ans, err := d.ex.Execute(context.Background(), verdict, b)
	status := 200
	if e, ok := errors.AsType[*client.Error](err); ok && ans != nil {
		status = e.Status
	} else if err != nil {
		return 0, nil, fmt.Errorf("execute: %w", err)
	}
	out, err := json.Marshal(ans)
	if err != nil {
		return 0, nil, err
	}
	m, err := generic(out)
	return status, m, err
}

func generic(b []byte) (map[string]any, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}
