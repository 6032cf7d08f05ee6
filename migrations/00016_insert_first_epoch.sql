-- +goose Up
INSERT INTO epochs (epoch, reason, actor) VALUES (1, 'schema created', 'migration');

-- +goose Down
DELETE FROM epochs WHERE epoch = 1;
