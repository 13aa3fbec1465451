package xlacanon

import (
	"fmt"
	"sort"
	"strings"
)

// excludedFlagPrefixes and excludedFlags are the XLA flags JAX leaves out of
// its own cache key (jax/_src/cache_key.py at cec06d1, see
// ../shared/notes/jax-cache.md): dump, debug and path flags that do not
// change the compiled executable.
//
// --xla_force_host_platform_device_count is excluded as JAX does: it only
// sets how many CPU devices exist, and a program's use of them reaches the
// executable through the module (num_partitions/num_replicas, shardings), the
// compile options (device assignment) and the topology, all of which stay in
// the key.
var (
	excludedFlagPrefixes = []string{"--xla_dump_", "--xla_tpu_sdc_checker_"}
	excludedFlags        = map[string]bool{
		"--xla_force_host_platform_device_count":     true,
		"--xla_gpu_cuda_data_dir":                    true,
		"--xla_gpu_per_fusion_autotune_cache_dir":    true,
		"--xla_gpu_experimental_autotune_cache_mode": true,
		"--xla_tpu_compiler_variant":                 true,
	}
)

// flagName returns the name part of a flag (before '=').
func flagName(f string) string {
	if k := strings.IndexByte(f, '='); k >= 0 {
		return f[:k]
	}
	return f
}

// flagExcluded reports whether the flag named name stays out of the key.
func flagExcluded(name string) bool {
	if excludedFlags[name] {
		return true
	}
	for _, p := range excludedFlagPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// normalizeFlags splits whitespace-separated entries (a whole XLA_FLAGS value
// may arrive as one string, which JAX splits the same way), writes a bare
// boolean "--name" as "--name=true" (the two are the same to XLA's flag
// parser), drops excluded flags and sorts the rest by name. The sort is
// stable: when one name appears more than once, the later value wins in XLA,
// so the relative order of repeats is kept in the key.
func normalizeFlags(in []string) ([]string, error) {
	var out []string
	for _, entry := range in {
		for _, f := range strings.Fields(entry) {
			if !strings.HasPrefix(f, "-") {
				return nil, fmt.Errorf("%w: xla_flags entry %q is not a flag (flags start with '-'; values must be joined with '=')", ErrSignature, f)
			}
			if !strings.Contains(f, "=") {
				f += "=true"
			}
			if flagExcluded(flagName(f)) {
				continue
			}
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return flagName(out[a]) < flagName(out[b]) })
	return out, nil
}
