package s3

// OnListed makes every listing of s call f with each object's key before
// using it (tests end a listing from there, at a page boundary).
func OnListed(s *Store, f func(key string)) { s.onListed = f }
