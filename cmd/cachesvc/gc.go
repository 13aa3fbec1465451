package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/cachesvc/cachesvc/fleet/gc"
	"github.com/cachesvc/cachesvc/fleet/registry"
	"github.com/cachesvc/cachesvc/stats/report"
	"github.com/cachesvc/cachesvc/store/s3"
)

const gcSummary = `Remove from the shared tier (the S3 bucket the replicas share) what no
replica has used for --older-than: entry records neither stored nor served
within it (replicas' access logs say what they served), then the blobs no
remaining record names, once older than --grace; and old access logs,
temporary and multipart uploads, expired leases and gone replicas' heartbeats.
Safe to run while replicas serve; see the fleet/gc package doc for the one
race left (an entry may go missing and be compiled again, never corrupt).

Credentials: --s3-credentials-file, else AWS_ACCESS_KEY_ID and
AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), else the shared credentials
file (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, profile AWS_PROFILE),
else instance metadata: the same order as serve.`

// dial returns the flags' bucket after checking that it exists, with errors
// that say what to fix.
func (f *s3Options) dial(ctx context.Context) (*registry.Bucket, error) {
	cfg, err := f.config(0, nil)
	if err != nil {
		return nil, err
	}
	b, err := registry.Dial(cfg)
	if err != nil {
		return nil, err
	}
	if err := s3.CheckBucket(ctx, b.Client, b.Name); err != nil {
		return nil, fmt.Errorf("open s3://%s on %s: %w", b.Name, cfg.Endpoint, err)
	}
	return b, nil
}

func runGc(ctx context.Context, args []string, sio stdio) error {
	fs := newFlagSet("gc", gcSummary, sio)
	var tier s3Options
	tier.register(fs)
	var olderThan, grace time.Duration
	ageVar(fs, &olderThan, "older-than", gc.DefaultOlderThan, "remove entries neither stored nor served for this `age` (36h, 90m, 30d)")
	ageVar(fs, &grace, "grace", gc.DefaultGrace, "keep unnamed blobs and uploads younger than this `age` (longer than the longest upload)")
	dryRun := fs.Bool("dry-run", false, "count what would be removed, remove nothing")
	asJSON := fs.Bool("json", false, "print the summary as JSON")
	if err := parseOperandless(fs, args, sio); err != nil {
		return err
	}
	// The age is checked first: a too short one is the user's own value,
	// while the grace it is compared with may be the default.
	if least := 2 * registry.DefaultAccessInterval; olderThan < least {
		// Replicas flush their access logs every DefaultAccessInterval: an
		// entry served only in the last minutes would look unused and go.
		return usagef("--older-than %s is too short: replicas record what they serve in access logs flushed every %s, so an entry served in the last minutes would be removed; use at least %s",
			formatAge(olderThan), registry.DefaultAccessInterval, formatAge(least))
	}
	if grace > olderThan {
		given := ""
		if !isSet(fs, "grace") {
			given = " (the default)"
		}
		return usagef("--grace %s%s is longer than --older-than %s: give --grace %s or less (it keeps unnamed blobs and uploads that young), or a longer --older-than",
			grace, given, olderThan, olderThan)
	}
	b, err := tier.dial(ctx)
	if err != nil {
		return err
	}
	cfg := gc.Config{
		Bucket: b, OlderThan: olderThan, Grace: grace, DryRun: *dryRun,
		Logger: slog.New(slog.NewTextHandler(sio.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	var bar *progressbar.ProgressBar
	if isTerminal(sio.Stderr) {
		bar = progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(sio.Stderr),
			progressbar.OptionSetDescription("gc"),
			progressbar.OptionShowCount(),
			progressbar.OptionSpinnerType(14),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		verb := "removed"
		if *dryRun {
			verb = "to remove"
		}
		cfg.Progress = func(p gc.Progress) {
			bar.Describe(fmt.Sprintf("gc: %s (%d %s)", p.Phase, p.Removed, verb))
			_ = bar.Set64(p.Examined)
		}
	}
	rep, err := gc.Run(ctx, cfg)
	if bar != nil {
		_ = bar.Finish()
	}
	if *asJSON {
		enc := json.NewEncoder(sio.Stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(rep); jerr != nil {
			return errors.Join(err, jerr)
		}
	} else {
		printGcReport(sio.Stdout, b, olderThan, grace, rep)
	}
	if err != nil {
		return fmt.Errorf("%w (the counts above are up to the failure)", err)
	}
	return nil
}

// printGcReport writes the run's summary.
func printGcReport(w io.Writer, b *registry.Bucket, olderThan, grace time.Duration, r gc.Report) {
	removed := "removed"
	if r.DryRun {
		removed = "would remove"
	}
	fmt.Fprintf(w, "gc of s3://%s/%s: older than %s, grace %s", b.Name, b.Prefix, formatAge(olderThan), formatAge(grace))
	if r.DryRun {
		fmt.Fprint(w, " (dry run: nothing removed)")
	}
	fmt.Fprintf(w, "\n  entries      kept %d (%d by access logs", r.EntriesKept, r.EntriesAccessed)
	if r.EntriesUnreadable > 0 {
		fmt.Fprintf(w, ", %d unreadable", r.EntriesUnreadable)
	}
	fmt.Fprintf(w, "), %s %d\n", removed, r.EntriesRemoved)
	fmt.Fprintf(w, "  blobs        kept %d (%s; %d in their grace), %s %d (%s)\n",
		r.BlobsKept, report.Bytes(r.BytesKept), r.BlobsYoung, removed, r.BlobsRemoved, report.Bytes(r.BytesRemoved))
	fmt.Fprintf(w, "  access logs  read %d, %s %d\n", r.AccessLogsRead, removed, r.AccessLogsRemoved)
	fmt.Fprintf(w, "  debris       %s %d uploads, %d multipart uploads, %d leases, %d replica heartbeats\n",
		removed, r.UploadsRemoved, r.MultipartAborted, r.LeasesRemoved, r.ReplicasRemoved)
	fmt.Fprintf(w, "  fleet state  %s %d run manifest parts, %d memo objects\n", removed, r.RunPartsRemoved, r.MemoRemoved)
	fmt.Fprintf(w, "  took %s\n", r.Duration.Round(time.Millisecond))
}
