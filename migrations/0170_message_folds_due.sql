-- Version 170: the streamed messages whose parts are still to be joined into their text. A
-- turn's end closes its messages and lists the ones with parts here, in the same write; the
-- store writer joins them (and so indexes them for search) in its next write, after the turn's
-- end is published: the end of a long answer reaches clients without waiting for its search
-- indexing. A row left by a server that stopped in between is joined when the store next opens.
-- Readers join a message's parts whether or not it is listed here.

CREATE TABLE message_folds_due (
    message_row INTEGER PRIMARY KEY
);
