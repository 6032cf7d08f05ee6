package migrate

import "errors"

// ErrDatabaseMissing reports that the database named in the URL does not exist. Create it
// (createdb, or Up with Options.CreateDatabase) and run the migrations again.
var ErrDatabaseMissing = errors.New("database does not exist")
