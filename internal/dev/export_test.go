package dev

// FreshDatabase is freshDatabase, for the tests of which database the demo may drop.
var FreshDatabase = freshDatabase
