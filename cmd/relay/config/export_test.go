package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/hai-relay/relay/model"
)

// Test-only API: the relay reads its config through cmd/relay's
// loadHomeConfig (which opens the file as the home's files are opened);
// the tests read a file at any path with LoadConfig.

// LoadConfig reads the config file at path and merges it over
// DefaultConfig, as ParseConfig does. A missing file is not an error: it
// yields DefaultConfig. Any other read error, and any malformed content, is
// an *model.Error with model.CodeInvalidConfig.
func LoadConfig(path string) (Config, error) {
	if path == "" {
		return Config{}, &model.Error{Code: model.CodeInvalidConfig,
			Message: "no config file path given", Hint: "pass the path of config.toml in the relay home"}
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return DefaultConfig(), nil
	}
	if err != nil {
		reason := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			reason = pe.Err.Error()
		}
		return Config{}, &model.Error{Code: model.CodeInvalidConfig,
			Message: fmt.Sprintf("%s: cannot read the config file: %s", path, reason),
			Hint:    "make it a readable file, or remove it to run with the defaults",
			Err:     err}
	}
	return ParseConfig(data, path)
}
