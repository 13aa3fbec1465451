package store

// CheckNamespace returns an error wrapping ErrInvalid when ns is not a valid
// namespace; op names the operation in the message ("get entry"). Every
// Store implementation calls it, so that all of them reject the same input.
func CheckNamespace(op, ns string) error { return checkNamespace(op, ns) }

// CheckPutOptions returns an error wrapping ErrInvalid when opts carries too
// many or too long labels or components (MaxLabels, MaxComponents,
// MaxLabelLen), for Store implementations other than Badger.
func CheckPutOptions(opts PutOptions) error {
	if err := checkLabels("labels", opts.Labels, MaxLabels); err != nil {
		return err
	}
	return checkLabels("components", opts.Components, MaxComponents)
}
