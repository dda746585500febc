// The do-not-contact rule: a contact tagged `do-not-contact` (in any letter case) is never drafted
// for nor sent to.

/** The tag that marks a contact as never to be contacted. */
export const DO_NOT_CONTACT_TAG = 'do-not-contact';

/** Whether one tag is the do-not-contact tag. */
export const isDoNotContactTag = (tag: string): boolean => tag.toLowerCase() === DO_NOT_CONTACT_TAG;

/** Whether a contact with these tags is do-not-contact. */
export const isDoNotContact = (tags: readonly string[]): boolean => tags.some(isDoNotContactTag);
