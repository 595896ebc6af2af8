// Package wording compares texts as they read to a person, not as they are encoded. The
// gateway screens what an upstream server asks a user through it against that reading: a
// question may not copy the gateway's own wording, and may not ask for a secret, however it is
// spelled on the wire.
//
// A text reads as its [Skeleton]: without the characters a host does not draw (package
// visible's default-ignorable code points), case-folded, compatibility forms decomposed
// (fullwidth, mathematical and circled letters), without combining marks, and with common
// lookalikes of Latin letters, of ':' and of '[' read as what they imitate (Cyrillic, Greek,
// small capitals). Wording is then told apart by letters, digits, '[' and ':' alone: spaces,
// other punctuation and markup ("**Note**:", "> Note :") do not hide a phrase. [Phrases] finds
// a set of phrases in a text read so; [Secret] finds the words that ask for a secret, read as
// whole words however a name is split ("cardPin", "card_pin", "P.I.N.").
//
// What a person is shown is not this reading: it is the text with the characters they do not
// see marked (visible.Mark). The reading is for matching only.
package wording
