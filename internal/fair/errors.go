package fair

// FieldError marks a refusal that concerns one field of a tenant: Field is the field's name
// ("name", "path", "weight", "demand", "reservation", "cap", "minRuntime") and Err says why, in
// the words the allocator's errors always used (Error returns Err's text unchanged). A caller
// that answers a request about one tenant finds it with errors.As in each error of the joined
// refusal and names the request's field instead of only quoting the text.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *FieldError) Unwrap() error { return e.Err }

// onField marks err as a refusal of field; nil stays nil.
func onField(field string, err error) error {
	if err == nil {
		return nil
	}
	return &FieldError{Field: field, Err: err}
}
