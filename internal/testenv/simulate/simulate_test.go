package simulate

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	seedFlag  = flag.Uint64("seed", 0, "run only this seed (replays a failure)")
	seedsFlag = flag.Int("seeds", 0, "how many seeds to run; 0 means $SIMULATE_SEEDS, else 200 (50 with -short)")
	firstFlag = flag.Uint64("first", 1, "the first seed")
	offFlag   = flag.String("off", "", "comma-separated classes of data, faults and settings to turn off (see Classes, FaultClasses, SettingClasses)")
	parFlag   = flag.Int("par", 16, "scenarios run at once")
	dumpFlag  = flag.Bool("dump", false, "with -seed: print what the queues and buckets hold at the end")
)

// TestSimulate runs generated scenarios through the real engine and checks
// each against its oracle. Each failing seed prints the command that
// replays it.
func TestSimulate(t *testing.T) {
	off, err := parseOff(*offFlag)
	if err != nil {
		t.Fatal(err)
	}
	seeds := []uint64{}
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		n := *seedsFlag
		if n == 0 {
			n = 200
			if testing.Short() {
				n = 50
			}
			if v := os.Getenv("SIMULATE_SEEDS"); v != "" {
				if n, err = strconv.Atoi(v); err != nil {
					t.Fatalf("SIMULATE_SEEDS=%q: %v", v, err)
				}
			}
		}
		for i := range n {
			seeds = append(seeds, *firstFlag+uint64(i))
		}
	}
	start := time.Now()
	var (
		mu       sync.Mutex
		outcomes []Outcome
		wg       sync.WaitGroup
		next     = make(chan uint64)
	)
	for range *parFlag {
		wg.Go(func() {
			for seed := range next {
				sc := Generate(seed, off)
				if *dumpFlag && *seedFlag != 0 {
					sc.Dump = os.Stdout
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				o := Run(ctx, sc)
				cancel()
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if len(o.Violations) > 0 {
					t.Errorf("seed %d: %d violations (%s):\n  %s\n  replay: %s", seed, len(o.Violations), describe(sc),
						strings.Join(firstViolations(o.Violations), "\n  "), replay(seed, *offFlag))
				} else if *seedFlag != 0 {
					t.Logf("seed %d passed: %s; %d records, %d deliveries, %d steps, faults %+v", seed, describe(sc), o.Records, o.Deliveries, o.Steps, o.Faults)
				}
			}
		})
	}
	for _, s := range seeds {
		next <- s
	}
	close(next)
	wg.Wait()
	t.Log(summary(outcomes, off, time.Since(start)))
}

func parseOff(s string) (Off, error) {
	off := Off{}
	known := slices.Concat(Classes, FaultClasses, SettingClasses)
	for _, c := range strings.Split(s, ",") {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !slices.Contains(known, c) {
			return nil, fmt.Errorf("-off: unknown class %q (known: %s)", c, strings.Join(known, ", "))
		}
		off[c] = true
	}
	return off, nil
}

func replay(seed uint64, off string) string {
	cmd := fmt.Sprintf("go test ./internal/testenv/simulate -run 'TestSimulate$' -seed=%d -v", seed)
	if off != "" {
		cmd += " -off=" + off
	}
	return cmd
}

// describe is a scenario's settings in a line.
func describe(sc Scenario) string {
	s := sc.Settings
	parts := []string{string(s.Mode)}
	if s.FIFO {
		parts = append(parts, "fifo")
	}
	parts = append(parts, fmt.Sprintf("max=%d chunk=%d inflight=%d", s.TargetMax, s.ChunkSize, s.MaxInFlight))
	for _, f := range []struct {
		on   bool
		name string
	}{{s.Claims, "claims"}, {s.Offload, "offload"}, {s.FailureQueue, "failure-queue"}, {!s.FailureQueue, "failure-s3"},
		{s.Report, "report"}, {s.WorkQueue, fmt.Sprintf("work-queue(inline=%d)", s.InlineMax)}, {s.WorkFIFO, "work-fifo"}, {s.Versioned, "versioned"},
		{s.Deadline > 0, fmt.Sprintf("deadline=%s/margin=%s", s.Deadline, s.Margin)}, {s.Die > 0, fmt.Sprintf("die=%.2f", s.Die)},
		{s.Redeliver > 0, fmt.Sprintf("redeliver=%.2f", s.Redeliver)}, {s.Notify != "", fmt.Sprintf("notify=%s(%d)", s.Notify, len(sc.Notifications))}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	for _, r := range sc.Requests {
		parts = append(parts, "request:"+cmp.Or(r.Driver, "direct"))
	}
	var objs []string
	for _, o := range sc.Objects {
		objs = append(objs, fmt.Sprintf("%s[%d%s]", o.Key, len(o.Records), strings.Join(append([]string{""}, o.Features...), " ")))
	}
	return strings.Join(parts, " ") + "; objects " + strings.Join(objs, ", ")
}

// summary is the line `make simulate` ends with.
func summary(outs []Outcome, off Off, d time.Duration) string {
	var records, deliveries, failed, stops int
	var faults FaultStats
	for _, o := range outs {
		records += o.Records
		deliveries += o.Deliveries
		stops += o.BudgetStops
		if len(o.Violations) > 0 {
			failed++
		}
		faults.EntryFailed += o.Faults.EntryFailed
		faults.SQS500 += o.Faults.SQS500
		faults.Throttled += o.Faults.Throttled
		faults.ResetBefore += o.Faults.ResetBefore
		faults.ResetAfter += o.Faults.ResetAfter
		faults.BadMD5 += o.Faults.BadMD5
		faults.SQSStall += o.Faults.SQSStall
		faults.S3500 += o.Faults.S3500
		faults.BodyCut += o.Faults.BodyCut
		faults.BodyStall += o.Faults.BodyStall
		faults.PutRefused += o.Faults.PutRefused
		faults.PutLost += o.Faults.PutLost
		faults.PutFailed += o.Faults.PutFailed
		faults.ClaimsErr += o.Faults.ClaimsErr
		faults.RunsErr += o.Faults.RunsErr
		faults.Died += o.Faults.Died
	}
	var offs []string
	for k := range off {
		offs = append(offs, k)
	}
	slices.Sort(offs)
	// Seeds by kind of violation, each with its first seed.
	kinds := map[string][]uint64{}
	for _, o := range outs {
		seen := map[string]bool{}
		for _, v := range o.Violations {
			k := kindOf(v)
			if !seen[k] {
				seen[k] = true
				kinds[k] = append(kinds[k], o.Seed)
			}
		}
	}
	var lines []string
	for k, seeds := range kinds {
		slices.Sort(seeds)
		lines = append(lines, fmt.Sprintf("  %4d seeds (first %d): %s", len(seeds), seeds[0], k))
	}
	slices.Sort(lines)
	return fmt.Sprintf("simulate: %d seeds in %s, %d failed; %d records, %d deliveries, %d tries to stop a run past its failure budget; faults %+v; off %v\n%s",
		len(outs), d.Round(time.Millisecond), failed, records, deliveries, stops, faults, offs, strings.Join(lines, "\n"))
}

// firstViolations keeps a failure's report short: the violations that are
// not about one record, then the first records.
func firstViolations(vs []string) []string {
	var general, records []string
	for _, v := range vs {
		if strings.HasPrefix(v, "record ") {
			records = append(records, v)
		} else {
			general = append(general, v)
		}
	}
	return append(general, records[:min(len(records), 10)]...)
}

// kindOf names the kind of a violation, for the summary.
func kindOf(v string) string {
	for _, k := range []struct{ has, kind string }{
		{"lost: neither delivered", "record lost"},
		{"readable but not delivered; on the failure output with [MessageGroupFailed", "readable record failed with its FIFO group"},
		{"readable but not delivered; on the failure output with [InvalidCharacters", "readable record on the failure output as InvalidCharacters"},
		{"readable but not delivered; on the failure output with [UnreadableRecord", "readable record on the failure output as UnreadableRecord"},
		{"readable but not delivered; on the failure output with [MessageTooLarge", "readable record on the failure output as MessageTooLarge"},
		{"readable but not delivered", "readable record on the failure output (other code)"},
		{"on the failure output too", "delivered record also on the failure output (redrive would send it again)"},
		{"explained by lost answers", "duplicate not explained by a lost answer"},
		{"record ids", "record delivered under several record ids"},
		{"share record id", "chunk-mode messages share a record id but carry different records"},
		{"not in the data", "delivered a record that is not in the data"},
		{"garbled", "record delivered garbled"},
		{"never succeeded", "request never succeeded, even healed"},
		{"dead-letter", "work messages left in the dead-letter queue"},
		{"in the run report", "unreadable record not exactly once in the run report"},
		{"rewritten", "offloaded payload rewritten"},
		{"not on the failure output with UnreadableRecord", "unreadable record missing from the failure output"},
		{"not on the failure output with", "bad record missing from the failure output"},
		{"delivered although it must fail", "bad record delivered"},
		{"did not settle", "did not settle"},
		{"after the end of the truncated stream", "unread range of a truncated stream not on the failure output"},
		{"near the size limit, neither", "record near the size limit lost"},
	} {
		if strings.Contains(v, k.has) {
			return k.kind
		}
	}
	return v
}
